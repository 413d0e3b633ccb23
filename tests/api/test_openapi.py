"""The OpenAPI document lists the routes of the wire contract (docs/api.md)."""

from __future__ import annotations

from typing import Any

import pytest

from mailui4agents.app import create_app
from mailui4agents.settings import Settings

# (method, path) pairs of docs/api.md (and of docs/design.md's extensions).
CONTRACT = [
    ("post", "/api/v1/agent/mail/{mail_id}/forward"),
    ("post", "/api/v1/mail/{mail_id}/forward"),
    ("get", "/api/v1/agent/sessions/{id}/participants"),
    ("get", "/api/v1/agent/contacts"),
    ("get", "/api/v1/agent/contacts/suggest"),
    ("get", "/api/v1/contacts/suggest"),
    ("get", "/api/v1/agent/search"),
    ("get", "/api/v1/search"),
    ("post", "/api/v1/agent/attachments"),
    ("get", "/api/v1/agent/attachments/{attachment_id}"),
    ("post", "/api/v1/attachments"),
    ("get", "/api/v1/attachments/{attachment_id}"),
    ("get", "/api/v1/agent/sessions/{session_id}"),
    ("post", "/api/v1/agent/sessions/interactive"),
    ("post", "/api/v1/auth/login"),
    ("post", "/api/v1/auth/tokens"),
    ("post", "/api/v1/mail"),
    ("get", "/api/v1/mailbox"),
    ("get", "/api/v1/mail/{mail_id}"),
    ("get", "/api/v1/mail/{mail_id}/thread"),
    ("get", "/api/v1/sessions"),
    ("get", "/api/v1/sessions/{session_id}"),
    ("patch", "/api/v1/sessions/{session_id}"),
    ("get", "/api/v1/permissions"),
    ("post", "/api/v1/permissions/{request_id}/decision"),
    ("get", "/api/v1/grants"),
    ("delete", "/api/v1/grants/{grant_id}"),
    ("get", "/api/v1/events"),
    ("post", "/api/v1/admin/users"),
    ("get", "/api/v1/admin/users"),
    ("post", "/api/v1/admin/agents"),
    ("get", "/api/v1/admin/agents"),
    ("post", "/api/v1/admin/agents/{name}/keys"),
    ("delete", "/api/v1/admin/agents/{name}/keys/{key_id}"),
    ("post", "/api/v1/agent/heartbeat"),
    ("get", "/api/v1/agent/events"),
    ("post", "/api/v1/agent/mail"),
    ("get", "/api/v1/agent/inbox"),
    ("post", "/api/v1/agent/inbox/read"),
    ("get", "/api/v1/agent/mail/{mail_id}"),
    ("get", "/api/v1/agent/mail/{mail_id}/thread"),
    ("post", "/api/v1/agent/permissions"),
    ("get", "/api/v1/agent/permissions/{request_id}"),
    ("get", "/healthz"),
    ("get", "/readyz"),
]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """The document, made once: building the app and its schema is the dear part,
    and the tests only read it."""
    openapi: dict[str, Any] = create_app(Settings()).openapi()
    return openapi


@pytest.mark.parametrize(("method", "path"), CONTRACT)
def test_openapi_lists_each_contract_route(doc: dict[str, Any], method: str, path: str) -> None:
    assert method in doc["paths"].get(path, {}), f"{method.upper()} {path} missing"


def test_strict_bodies_are_documented_with_their_fields(doc: dict[str, Any]) -> None:
    body = doc["paths"]["/api/v1/mail"]["post"]["requestBody"]["content"]["application/json"]
    ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
    schema = doc["components"]["schemas"][ref]
    assert schema.get("additionalProperties") is False
    assert {"to", "subject", "body", "permission_mode"} <= set(schema["properties"])
