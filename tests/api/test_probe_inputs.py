"""What an attack probe found (issue 22, item 6): inputs that were 500s, hangs or
wrong answers. Each is now a 400 naming the field (or an empty page), on SQLite
and PostgreSQL alike: repeat rules dateutil crashed or hung on, a NUL in a JSON
text field or a path id, cursors and `body_limit` at the edge of 64 bits, and a
multipart body without its closing boundary."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mailui4agents.settings import Settings
from tests.api.test_strict_input import (
    ENDPOINTS,
    JSON,
    call,
    error_of,
    fill,
    writes_nothing,
)
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio

CAL = "/api/v1/calendar"
AGENT_CAL = "/api/v1/agent/calendar"


async def build_world(api: Api) -> dict[str, str]:
    """As tests/api/test_strict_input.py's world, plus a calendar entry of ana's
    and one of claude's (for the PATCH cases)."""
    await api.agent("claude", ["/srv/shop"])
    await api.user("ana")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login", body="500s")
    assert r.status_code == 201, r.text
    mail = r.json()
    entries = {}
    for who, path in (("ana", CAL), ("claude", AGENT_CAL)):
        r = await api.http.post(
            path,
            json={"to": [_other(who)], "subject": "s", "body": "b", "start_at": _soon()},
            headers=api.auth(who),
        )
        assert r.status_code == 201, r.text
        entries[who] = r.json()["id"]
    return {
        "session_id": mail["session_id"],
        "mail_id": mail["id"],
        "alias": mail["session_alias"],
        "ana_entry": entries["ana"],
        "claude_entry": entries["claude"],
    }


@snapshot
async def world(api: Api) -> dict[str, str]:
    return await build_world(api)


def _other(who: str) -> str:
    return "claude@/srv/shop" if who == "ana" else "ana@/srv/shop"


def _soon() -> str:
    at = time.time() + 3600
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


# --- 2. NUL in JSON text and path ids; cursors at 2^63 - 1 --------------------------


def _text_fields(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(field name as errors name it, body with a NUL in that field) per text field."""
    out: list[tuple[str, Any]] = []
    for k, v in body.items():
        if isinstance(v, str):
            out.append((k, {**body, k: v + "\x00x"}))
        elif isinstance(v, list) and v and isinstance(v[0], str):
            out.append((f"{k}[0]", {**body, k: [v[0] + "\x00x", *v[1:]]}))
    return out


@pytest.mark.parametrize("ep_id", list(ENDPOINTS))
async def test_a_nul_in_any_json_text_field_is_a_400_naming_it(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str
) -> None:
    ep = ENDPOINTS[ep_id]
    cases = _text_fields(fill(ep.valid, world))
    assert cases, ep_id
    for field, body in cases:
        raw = json.dumps(body).encode()
        assert b"\\u0000" in raw
        with writes_nothing(settings):
            r = await call(api, ep, world, content=raw, headers=JSON)
        err = error_of(r)
        assert (err["code"], err["field"]) == ("invalid_value", field), (ep_id, err)
    # A NUL in a key is named too, escaped as the lone surrogate's key is.
    raw = json.dumps({**fill(ep.valid, world), "a\x00b": 1}).encode()
    assert error_of(await call(api, ep, world, content=raw, headers=JSON))["field"] == "a\\0b"


async def test_a_nul_in_a_calendar_body_and_a_nested_list_is_named_by_its_path(
    api: Api, world: dict[str, str]
) -> None:
    body = {"to": ["claude@/srv/shop", "x\x00"], "subject": "s", "body": "b", "start_at": _soon()}
    err = error_of(await api.http.post(CAL, json=body, headers=api.auth("ana")))
    assert err["field"] == "to[1]"
    r = await api.http.patch(
        f"{CAL}/{world['ana_entry']}", json={"rrule": "FREQ=DAILY\x00"}, headers=api.auth("ana")
    )
    assert error_of(r)["field"] == "rrule"


def _path_cases(api: Api) -> list[tuple[str, str, str, str]]:
    """(method, path with a NUL in one parameter, that parameter, caller) for
    every route of the app with a path parameter."""
    spec = api.http._transport.app.openapi()  # type: ignore[attr-defined]
    out = []
    for path, item in spec["paths"].items():
        names = [p["name"] for op in item.values() for p in op.get("parameters", [])]
        params = [n for n in dict.fromkeys(names) if "{" + n + "}" in path]
        for method in item:
            for p in params:
                url = path
                for q in params:
                    url = url.replace("{" + q + "}", "a%00b" if q == p else "x")
                who = "claude" if path.startswith("/api/v1/agent/") else "admin"
                out.append((method.upper(), url, p, who))
    return out


async def test_a_nul_in_any_path_parameter_is_a_400_naming_it(
    api: Api, world: dict[str, str]
) -> None:
    cases = _path_cases(api)
    assert len(cases) > 20
    for method, url, param, who in cases:
        body: dict[str, object] | None = {} if method in ("POST", "PATCH", "PUT") else None
        r = await api.http.request(method, url, json=body, headers=api.auth(who))
        err = error_of(r)
        assert (err["code"], err["field"]) == ("invalid_value", param), (method, url, err)


CURSOR_ROUTES = [
    ("/api/v1/mailbox", "ana"),
    ("/api/v1/agent/inbox", "claude"),
    ("/api/v1/mail/{mail_id}/thread", "ana"),
    ("/api/v1/agent/mail/{mail_id}/thread?session_id={session_id}", "claude"),
    ("/api/v1/search?q=login", "ana"),
    ("/api/v1/agent/search?q=login&session_id={session_id}", "claude"),
    ("/api/v1/sessions", "ana"),
    ("/api/v1/calendar", "ana"),
    ("/api/v1/agent/calendar", "claude"),
]
EDGE_CURSORS = [str(2**63 - 1), str(2**63 - 2), str(2**31), str(2**31 - 1), str(2**64)]


@pytest.mark.parametrize(("path", "who"), CURSOR_ROUTES)
async def test_a_cursor_at_the_edge_of_64_bits_is_a_400_or_an_empty_page(
    api: Api, world: dict[str, str], path: str, who: str
) -> None:
    url = fill(path, world)
    joiner = "&" if "?" in url else "?"
    for cursor in EDGE_CURSORS:
        r = await api.http.get(f"{url}{joiner}cursor={cursor}", headers=api.auth(who))
        if r.status_code == 200:
            assert r.json()["next_cursor"] is None, (cursor, r.text)
            assert r.json()["items"] == [] or "calendar" not in path, (cursor, r.text)
        else:
            err = error_of(r)
            assert (err["code"], err["field"]) == ("invalid_value", "cursor"), (cursor, err)


# --- 3. body_limit ------------------------------------------------------------------


BODY_LIMIT_URLS = [
    ("/api/v1/mailbox?body_limit=", "ana"),
    ("/api/v1/agent/inbox?body_limit=", "claude"),
    ("/api/v1/agent/mail/{mail_id}?body_limit=", "claude"),
]


@pytest.mark.parametrize(("path", "who"), BODY_LIMIT_URLS)
@pytest.mark.parametrize("value", [str(2**63 - 1), str(2**63), str(2**31 - 1), "9" * 40])
async def test_a_body_limit_past_the_largest_is_a_400_naming_it(
    api: Api, world: dict[str, str], path: str, who: str, value: str
) -> None:
    r = await api.http.get(fill(path, world) + value, headers=api.auth(who))
    err = error_of(r)
    assert (err["code"], err["field"]) == ("invalid_value", "body_limit"), err


@pytest.mark.parametrize(("path", "who"), BODY_LIMIT_URLS)
async def test_the_largest_body_limit_is_still_accepted(
    api: Api, world: dict[str, str], path: str, who: str
) -> None:
    r = await api.http.get(fill(path, world) + str(2**31 - 2), headers=api.auth(who))
    assert r.status_code == 200, r.text
