"""The OpenAPI document tells the truth: a well-formed document, response schemas,
the one error shape, no 422, and every status a route answers is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.app import create_app
from tests.conftest import Api, fast_settings

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = create_app(fast_settings(Path(tmp_path_factory.mktemp("openapi"))))
    return app.openapi()


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for p, item in doc["paths"].items() for m, op in item.items()]


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_the_document_is_well_formed(doc: dict[str, Any]) -> None:
    """A structural check of OpenAPI 3.1: version, info, operations with
    responses keyed by status, and every $ref resolving inside the document."""
    assert doc["openapi"].startswith("3.")
    assert doc["info"]["title"] and doc["info"]["version"]
    schemas = doc["components"]["schemas"]
    for method, path, op in operations(doc):
        assert method in METHODS, (method, path)
        assert path.startswith("/"), path
        assert op["responses"], (method, path)
        for code, response in op["responses"].items():
            assert re.fullmatch(r"[1-5]\d\d", code), (method, path, code)
            assert response.get("description"), (method, path, code)
        for name in re.findall(r"{(\w+)}", path):
            params = [p for p in op.get("parameters", []) if p["in"] == "path"]
            assert name in {p["name"] for p in params}, (method, path, name)
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[-1] in schemas, ref


def test_no_operation_documents_422_and_errors_use_the_one_shape(doc: dict[str, Any]) -> None:
    assert "422" not in json.dumps(doc["paths"])
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    error = doc["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"]
    for method, path, op in operations(doc):
        for code, response in op["responses"].items():
            if code.startswith("4"):
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)


def test_error_statuses_are_documented_where_they_can_happen(doc: dict[str, Any]) -> None:
    codes = {
        (m, p): {int(c) for c in op["responses"] if c.startswith("4")}
        for m, p, op in operations(doc)
    }
    assert codes[("post", "/api/v1/mail")] == {400, 401, 403, 404, 409, 413, 429}
    assert codes[("post", "/api/v1/auth/login")] == {400, 401, 413, 429}
    assert codes[("get", "/api/v1/sessions/{session_id}")] == {400, 401, 403, 404}
    assert codes[("get", "/healthz")] == set()
    assert 409 in codes[("post", "/api/v1/permissions/{request_id}/decision")]
    assert 413 in codes[("post", "/api/v1/attachments")]
    assert all({401, 403} <= c for (m, p), c in codes.items() if p.startswith("/api/v1/agent/"))


def _success_schemas(op: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (media, body.get("schema", {}))
        for code, response in op["responses"].items()
        if code.startswith("2")
        for media, body in response.get("content", {}).items()
    ]


def test_every_operation_has_a_response_schema(doc: dict[str, Any]) -> None:
    """Each success answer names a model (a $ref into the components), or is
    documented as bytes; streams document their frames as `text/event-stream`.
    A route whose only success is 204 has no body to model."""
    schemas = doc["components"]["schemas"]
    unmodelled = []
    for method, path, op in operations(doc):
        found = _success_schemas(op)
        if not found and [c for c in op["responses"] if c.startswith("2")] == ["204"]:
            continue
        assert found, (method, path)
        for media, schema in found:
            binary = schema == {"type": "string", "format": "binary"}
            if not (_refs(schema) or binary):
                unmodelled.append((method, path, media))
            for ref in _refs(schema):  # a real model: it has properties
                assert schemas[ref.rsplit("/", 1)[-1]].get("properties"), (method, path, ref)
    assert unmodelled == []
    for path in ("/api/v1/events", "/api/v1/agent/events"):
        assert _success_schemas(doc["paths"][path]["get"]) == [
            ("text/event-stream", {"$ref": "#/components/schemas/EventFrame"})
        ]
    frame = schemas["EventFrame"]["properties"]["data"]["anyOf"]
    assert {r["$ref"].rsplit("/", 1)[-1] for r in frame} == {
        "NewMailEvent",
        "SessionOut",
        "PermissionOut",
        "PermissionDecisionEvent",
        "WorkActionOut",
        "ResetEvent",
    }
    download = doc["paths"]["/api/v1/attachments/{attachment_id}"]["get"]
    assert _success_schemas(download) == [
        ("application/octet-stream", {"type": "string", "format": "binary"})
    ]


def _template(doc: dict[str, Any], method: str, url: str) -> str | None:
    paths: dict[str, Any] = doc["paths"]
    for path, item in paths.items():
        pattern = "^" + re.sub(r"{\w+}", "[^/]+", path) + "$"
        if method in item and re.match(pattern, url):
            return path
    return None


@pytest.mark.anyio
async def test_every_status_a_route_answers_is_documented(api: Api) -> None:
    """Drive the routes through success and refusal and check each answer's
    status against that operation's documented responses."""
    app = api.http._transport.app  # type: ignore[attr-defined]
    doc = app.openapi()
    seen: list[tuple[str, str, int]] = []

    async def record(response: httpx.Response) -> None:
        seen.append(
            (response.request.method.lower(), response.request.url.path, response.status_code)
        )

    api.http.event_hooks["response"].append(record)
    await api.agent("claude")
    await api.user("ana")
    await api.user("bob")
    ana, claude, bob = api.auth("ana"), api.auth("claude"), api.auth("bob")
    h = api.http
    mail = (await api.send("ana", ["claude@/srv/shop.new"], subject="Fix")).json()
    sid, mid = mail["session_id"], mail["id"]
    await api.send("claude", [mail["reply_address"]], relay=True, relay_key="r1")
    await api.send("claude", [mail["reply_address"]], relay=True, relay_key="r1")  # 200 dup
    await api.send("ana", ["claude@/srv/shop.nope"])  # 404
    await api.send("ana", ["nobody@/srv/shop"])  # 400
    await h.post("/api/v1/mail", json={"to": ["claude@/srv/shop"], "subjct": "x"}, headers=ana)
    await h.post(
        "/api/v1/mail", content=b"[" * 10, headers={**ana, "content-type": "application/json"}
    )
    await h.post("/api/v1/mail", content=b"x" * (2 << 20), headers=ana)  # 413
    await h.get("/api/v1/mailbox", headers=ana)
    await h.get("/api/v1/mailbox", headers=claude)  # 403
    await h.get("/api/v1/mailbox")  # 401
    await h.get(f"/api/v1/mail/{mid}", headers=ana)
    await h.get(f"/api/v1/mail/{mid}", headers=bob)  # 404
    await h.get(f"/api/v1/mail/{mid}/thread", headers=ana)
    await h.get("/api/v1/agent/inbox", headers=claude)
    await h.get(f"/api/v1/agent/mail/{mid}", headers=claude)
    await h.get(f"/api/v1/agent/mail/{mid}/thread?session_id={sid}", headers=claude)
    await h.get(f"/api/v1/agent/mail/{mid}/thread", headers=claude)  # 400 no scope
    await h.get("/api/v1/sessions", headers=ana)
    await h.get(f"/api/v1/sessions/{sid}", headers=ana)
    await h.get(f"/api/v1/sessions/{sid}", headers=bob)  # 404
    await h.get(f"/api/v1/agent/sessions/{sid}", headers=claude)
    await h.get(f"/api/v1/sessions/{sid}/deciders", headers=ana)
    await h.post(f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=ana)
    await h.delete(f"/api/v1/sessions/{sid}/deciders/ana", headers=ana)  # 409 owner
    await h.delete(f"/api/v1/sessions/{sid}/deciders/bob", headers=ana)
    ask = {"session_id": sid, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    req = (
        await h.post("/api/v1/agent/permissions", json={**ask, "relay_key": "p1"}, headers=claude)
    ).json()
    await h.post("/api/v1/agent/permissions", json={**ask, "relay_key": "p1"}, headers=claude)
    await h.get(f"/api/v1/agent/permissions/{req['id']}", headers=claude)
    await h.get("/api/v1/permissions", headers=ana)
    decide = f"/api/v1/permissions/{req['id']}/decision"
    await h.post(decide, json={"decision": "approve", "always": True}, headers=ana)
    await h.post(decide, json={"decision": "approve"}, headers=ana)  # 409
    await h.post(decide, json={"decision": "maybe"}, headers=ana)  # 400
    grants = (await h.get("/api/v1/grants", headers=ana)).json()["items"]
    await h.delete(f"/api/v1/grants/{grants[0]['id']}", headers=ana)
    await h.post(f"/api/v1/mail/{mid}/forward", json={"to": ["bob@/srv/shop"]}, headers=ana)
    await h.post(
        f"/api/v1/agent/mail/{mid}/forward",
        json={"to": ["ana@/srv/shop"], "session_id": sid},
        headers=claude,
    )
    await h.post(
        "/api/v1/agent/sessions/interactive",
        json={"platform_id": "p", "owner": "ana", "cwd": "/srv/shop"},
        headers=claude,
    )
    await h.patch(f"/api/v1/sessions/{sid}", json={"archived": True}, headers=ana)
    await api.send("ana", [mail["reply_address"]])  # 409 archived
    await h.patch(f"/api/v1/sessions/{sid}", json={"archived": True}, headers=bob)  # 404
    for _ in range(12):
        await h.post("/api/v1/auth/login", json={"username": "bob", "password": "no"})  # 401, 429
    await h.get("/api/v1/admin/users", headers=api.auth("admin"))
    await h.get("/api/v1/admin/agents", headers=api.auth("admin"))
    await h.get("/healthz")

    undocumented = []
    for method, url, status in seen:
        path = _template(doc, method, url)
        assert path is not None, (method, url)
        if str(status) not in doc["paths"][path][method]["responses"]:
            undocumented.append((method, path, status))
    assert undocumented == []
    statuses = {status for _, _, status in seen}
    assert {200, 201, 400, 401, 403, 404, 409, 413, 429} <= statuses, statuses


def test_the_new_mail_event_the_server_builds_is_the_wire_model() -> None:
    """The server's one builder of `new_mail` and the shared model name the same
    fields (the client parses events with that model)."""
    from mailui4agents.services.wire_shapes import NEW_MAIL_FIELDS
    from mailui4agents.wire.models import NewMailEvent

    fields = {f.alias or name for name, f in NewMailEvent.model_fields.items()}
    assert fields == set(NEW_MAIL_FIELDS)
