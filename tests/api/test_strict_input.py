"""Strict input: every JSON endpoint refuses unknown fields, wrong types, missing
fields, non-object bodies and bad values with the one error shape — and writes
nothing when it refuses. The heartbeat is the one lenient body: it echoes unknown
fields instead of refusing them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from mailui4agents.settings import Settings
from tests.conftest import USER_PASSWORD, Api, snapshot
from tests.pg_fixtures import db_all_rows

pytestmark = pytest.mark.anyio

MAIL_FIELDS = (
    "to",
    "cc",
    "subject",
    "body",
    "parent_mail_id",
    "attachment_ids",
    "permission_mode",
    "worktree",
)
AGENT_MAIL_FIELDS = (
    "to",
    "cc",
    "subject",
    "body",
    "parent_mail_id",
    "attachment_ids",
    "from_session_id",
    "relay",
    "relay_key",
    "type",
)
HEARTBEAT_FIELDS = (
    "status",
    "platform",
    "version",
    "mode_enforcement",
    "workspaces",
    "platform_sessions",
    "pending",
    "sandbox",
)


@dataclass(frozen=True)
class Endpoint:
    """One JSON endpoint: who calls it, a body it accepts, and its accepted fields.

    Strings in `path` and `valid` may name `{session_id}`, `{mail_id}` or `{alias}`
    of the mail the `world` fixture sent."""

    id: str
    method: str
    path: str
    caller: str | None
    valid: dict[str, Any]
    accepted: tuple[str, ...]
    ok_status: int


ENDPOINTS = {
    ep.id: ep
    for ep in (
        Endpoint(
            "login",
            "POST",
            "/api/v1/auth/login",
            None,
            {"username": "ana", "password": USER_PASSWORD},
            ("username", "password"),
            200,
        ),
        Endpoint("token", "POST", "/api/v1/auth/tokens", "ana", {"name": "laptop"}, ("name",), 201),
        Endpoint(
            "mail",
            "POST",
            "/api/v1/mail",
            "ana",
            {"to": ["claude@/srv/shop.new"], "subject": "Deploy", "body": "please"},
            MAIL_FIELDS,
            201,
        ),
        Endpoint(
            "admin-user",
            "POST",
            "/api/v1/admin/users",
            "admin",
            {"username": "bob", "password": "bob-password", "is_admin": False},
            ("username", "password", "is_admin"),
            201,
        ),
        Endpoint(
            "admin-agent",
            "POST",
            "/api/v1/admin/agents",
            "admin",
            {"name": "codex", "workspaces": ["/srv/shop"]},
            ("name", "workspaces", "owners", "taskers", "max_mode"),
            201,
        ),
        Endpoint(
            "agent-patch",
            "PATCH",
            "/api/v1/agents/claude",
            "admin",
            {"workspaces": ["/srv/*"], "max_mode": {"taskers": "plan"}},
            ("workspaces", "max_mode"),
            200,
        ),
        Endpoint(
            "agent-tasker",
            "POST",
            "/api/v1/agents/claude/taskers",
            "admin",
            {"name": "dora"},
            ("name",),
            201,
        ),
        Endpoint(
            "agent-mail",
            "POST",
            "/api/v1/agent/mail",
            "claude",
            {"to": ["ana@/srv/shop.{alias}"], "subject": "Re: Fix login", "body": "done"},
            AGENT_MAIL_FIELDS,
            201,
        ),
        Endpoint(
            "inbox-read",
            "POST",
            "/api/v1/agent/inbox/read",
            "claude",
            {"session_id": "{session_id}"},
            ("session_id", "mail_ids"),
            200,
        ),
        Endpoint(
            "heartbeat",
            "POST",
            "/api/v1/agent/heartbeat",
            "claude",
            {"status": "busy", "platform": "claude-code"},
            HEARTBEAT_FIELDS,
            200,
        ),
        Endpoint(
            "session-patch",
            "PATCH",
            "/api/v1/sessions/{session_id}",
            "ana",
            {"alias": "renamed", "archived": False},
            ("alias", "permission_mode", "archived"),
            200,
        ),
    )
}
STRICT = [k for k in ENDPOINTS if k != "heartbeat"]


@snapshot
async def world(api: Api) -> dict[str, str]:
    """Agent claude, user ana, and one mail from ana that opened a session."""
    await api.agent("claude")
    await api.user("ana")
    api.open_agents = False  # dora is no tasker of claude yet: agent-tasker adds her
    await api.user("dora")
    api.open_agents = True
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login", body="500s")
    assert r.status_code == 201, r.text
    mail = r.json()
    return {"session_id": mail["session_id"], "mail_id": mail["id"], "alias": mail["session_alias"]}


def fill(value: Any, world: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**world)
    if isinstance(value, list):
        return [fill(v, world) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, world) for k, v in value.items()}
    return value


async def call(
    api: Api,
    ep: Endpoint,
    world: dict[str, str],
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    all_headers = {**(api.auth(ep.caller) if ep.caller else {}), **(headers or {})}
    path = fill(ep.path, world)
    if content is not None:
        return await api.http.request(ep.method, path, content=content, headers=all_headers)
    return await api.http.request(ep.method, path, json=fill(body, world), headers=all_headers)


def db_rows(settings: Settings) -> dict[str, list[str]]:
    """Every row of every table, to prove a refused request wrote nothing."""
    return db_all_rows(settings)


@contextmanager
def writes_nothing(settings: Settings) -> Iterator[None]:
    before = db_rows(settings)
    yield
    after = db_rows(settings)
    changed = sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
    assert not changed, f"a refused request changed tables {changed}"


def error_of(r: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert isinstance(err.get("message"), str) and err["message"], err
    return err


def assert_accepted(err: dict[str, Any], ep: Endpoint) -> None:
    accepted = err["accepted_fields"]
    assert len(accepted) == len(set(accepted)), accepted
    assert set(accepted) == set(ep.accepted)


# --- the valid side: every table entry is a body the endpoint really accepts ---


@pytest.mark.parametrize("ep_id", list(ENDPOINTS))
async def test_the_valid_body_of_each_endpoint_is_accepted_and_written(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str
) -> None:
    ep = ENDPOINTS[ep_id]
    before = db_rows(settings)
    r = await call(api, ep, world, ep.valid)
    assert r.status_code == ep.ok_status, r.text
    assert db_rows(settings) != before  # so "writes nothing" below is not vacuous


# --- (a) unknown fields ---


@pytest.mark.parametrize("ep_id", STRICT)
async def test_an_unknown_field_is_refused_with_its_name_and_the_accepted_fields(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str
) -> None:
    ep = ENDPOINTS[ep_id]
    for unknown in ("attachment_id", "Subject", "mail_ids "):  # extra, misspelt, trailing space
        with writes_nothing(settings):
            r = await call(api, ep, world, {**ep.valid, unknown: "x"})
        err = error_of(r)
        assert set(err) == {"code", "message", "field", "accepted_fields"}
        assert err["code"] == "unknown_field"
        assert err["field"] == unknown
        assert unknown in err["message"]
        assert_accepted(err, ep)


async def test_an_unknown_field_is_reported_before_a_wrong_type(
    api: Api, world: dict[str, str]
) -> None:
    body = {"to": "claude@/srv/shop.new", "subject": 1, "body": "b", "attachment_id": "x"}
    err = error_of(await call(api, ENDPOINTS["mail"], world, body))
    assert (err["code"], err["field"]) == ("unknown_field", "attachment_id")


async def test_an_agent_may_not_choose_a_permission_mode(api: Api, world: dict[str, str]) -> None:
    ep = ENDPOINTS["agent-mail"]
    err = error_of(await call(api, ep, world, {**ep.valid, "permission_mode": "full"}))
    assert (err["code"], err["field"]) == ("unknown_field", "permission_mode")
    assert "permission_mode" not in err["accepted_fields"]


async def test_the_heartbeat_echoes_unknown_fields_and_still_applies_known_ones(
    api: Api, world: dict[str, str]
) -> None:
    ep = ENDPOINTS["heartbeat"]
    body = {"status": "busy", "future_flag": True, "capabilities": {"x": 1}}
    r = await call(api, ep, world, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["ok"] is True
    assert sorted(out["unknown_fields"]) == ["capabilities", "future_flag"]
    agents = await api.http.get("/api/v1/admin/agents", headers=api.auth("admin"))
    [claude] = agents.json()["items"]
    assert claude["status"] == "busy"


async def test_a_heartbeat_without_unknown_fields_echoes_an_empty_list(
    api: Api, world: dict[str, str]
) -> None:
    r = await call(api, ENDPOINTS["heartbeat"], world, {"status": "idle"})
    assert r.status_code == 200, r.text
    assert r.json()["unknown_fields"] == []


# --- (b) wrong types ---

TYPE_CASES = [
    ("login", "username", 5, "string"),
    ("login", "password", ["pw"], "string"),
    ("token", "name", 3, "string"),
    ("mail", "to", "claude@/srv/shop.new", "array"),
    ("mail", "cc", "ana@/srv/shop", "array"),
    ("mail", "subject", 42, "string"),
    ("mail", "body", {"text": "b"}, "string"),
    ("mail", "parent_mail_id", 5, "UUID string"),
    ("mail", "attachment_ids", "a", "array"),
    ("admin-user", "is_admin", "yes", "boolean"),
    ("admin-user", "is_admin", 1, "boolean"),
    ("admin-user", "password", 12345678, "string"),
    ("admin-agent", "name", 7, "string"),
    ("admin-agent", "workspaces", "/srv/shop", "array"),
    ("agent-mail", "relay", "true", "boolean"),
    ("agent-mail", "relay_key", 5, "string"),
    ("agent-mail", "from_session_id", 1, "UUID string"),
    ("agent-mail", "to", "ana@/srv/shop", "array"),
    ("inbox-read", "mail_ids", "x", "array"),
    ("inbox-read", "session_id", 5, "UUID string"),
    ("heartbeat", "workspaces", "/srv/shop", "array"),
    ("heartbeat", "version", 3, "string"),
    ("heartbeat", "platform_sessions", {"platform_id": "p"}, "array"),
    ("session-patch", "archived", "true", "boolean"),
    ("session-patch", "alias", 5, "string"),
]


@pytest.mark.parametrize(
    ("ep_id", "field", "value", "expected"),
    TYPE_CASES,
    ids=[f"{e}-{f}-{type(v).__name__}" for e, f, v, _ in TYPE_CASES],
)
async def test_a_wrong_type_is_refused_naming_the_field_and_the_expected_type(
    api: Api,
    world: dict[str, str],
    settings: Settings,
    ep_id: str,
    field: str,
    value: Any,
    expected: str,
) -> None:
    ep = ENDPOINTS[ep_id]
    with writes_nothing(settings):
        r = await call(api, ep, world, {**ep.valid, field: value})
    err = error_of(r)
    assert err["code"] == "invalid_type"
    assert err["field"] == field
    assert err["expected"] == expected
    assert field in err["message"] and expected in err["message"]
    assert_accepted(err, ep)


async def test_a_list_item_of_the_wrong_type_is_named_like_the_gateway_names_list_items(
    api: Api, world: dict[str, str]
) -> None:
    ep = ENDPOINTS["mail"]
    wrong_type = error_of(await call(api, ep, world, {**ep.valid, "to": [1]}))
    unknown_name = error_of(await call(api, ep, world, {**ep.valid, "to": ["nobody@/srv/shop"]}))
    assert wrong_type["code"] == "invalid_type"
    assert unknown_name["code"] == "invalid_value"
    assert wrong_type["field"] == unknown_name["field"] == "to[0]"


# --- (c) missing required fields ---

MISSING_CASES = [
    ("login", "username"),
    ("login", "password"),
    ("token", "name"),
    ("mail", "to"),
    ("mail", "subject"),
    ("mail", "body"),
    ("admin-user", "username"),
    ("admin-user", "password"),
    ("admin-agent", "name"),
    ("agent-mail", "to"),
    ("agent-mail", "subject"),
    ("agent-mail", "body"),
]


@pytest.mark.parametrize(("ep_id", "field"), MISSING_CASES)
async def test_a_missing_required_field_is_refused_naming_it(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str, field: str
) -> None:
    ep = ENDPOINTS[ep_id]
    body = {k: v for k, v in ep.valid.items() if k != field}
    with writes_nothing(settings):
        r = await call(api, ep, world, body)
    err = error_of(r)
    assert err["code"] == "missing_field"
    assert err["field"] == field
    assert field in err["message"]
    assert_accepted(err, ep)


async def test_marking_read_without_session_or_mail_ids_is_a_missing_field(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    with writes_nothing(settings):
        r = await call(api, ENDPOINTS["inbox-read"], world, {})
    err = error_of(r)
    assert err["code"] == "missing_field"
    assert err["field"] in ("session_id", "mail_ids")


# --- (d) invalid JSON and non-object bodies ---

BAD_BODIES = {
    "broken-json": b'{"to": [',
    "array": b"[]",
    "string": b'"hello"',
    "number": b"42",
    "null": b"null",
    "empty": b"",
}
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("ep_id", list(ENDPOINTS))
async def test_a_body_that_is_not_a_json_object_is_refused(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str
) -> None:
    ep = ENDPOINTS[ep_id]
    for bad, content in BAD_BODIES.items():
        with writes_nothing(settings):
            r = await call(api, ep, world, content=content, headers=JSON)
        err = error_of(r)
        # Not `missing_field "body"`: on /mail that would blame the mail's own field.
        assert err["code"] == "invalid_type", (bad, err)
        assert "JSON object" in err["message"], (bad, err)


async def test_a_json_body_sent_as_plain_text_is_refused(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    ep = ENDPOINTS["mail"]
    with writes_nothing(settings):
        r = await call(
            api,
            ep,
            world,
            content=json.dumps(ep.valid).encode(),
            headers={"Content-Type": "text/plain"},
        )
    assert error_of(r)["code"] == "invalid_type"


# --- (e) wrong values ---

VALUE_CASES = [
    ("mail", "permission_mode", "FULL", "permission_mode"),
    ("mail", "parent_mail_id", "not-a-uuid", "parent_mail_id"),
    ("mail", "attachment_ids", ["nope"], "attachment_ids[0]"),
    ("agent-mail", "parent_mail_id", "1234", "parent_mail_id"),
    ("agent-mail", "from_session_id", "zzz", "from_session_id"),
    ("inbox-read", "session_id", "nope", "session_id"),
    ("inbox-read", "mail_ids", ["x"], "mail_ids[0]"),
    ("session-patch", "permission_mode", "FULL", "permission_mode"),
    ("session-patch", "permission_mode", "yolo", "permission_mode"),
    ("token", "name", "", "name"),
]


@pytest.mark.parametrize(
    ("ep_id", "field", "value", "named"),
    VALUE_CASES,
    ids=[f"{e}-{f}-{v!r}" for e, f, v, _ in VALUE_CASES],
)
async def test_a_wrong_value_is_refused_naming_the_field(
    api: Api,
    world: dict[str, str],
    settings: Settings,
    ep_id: str,
    field: str,
    value: Any,
    named: str,
) -> None:
    ep = ENDPOINTS[ep_id]
    with writes_nothing(settings):
        r = await call(api, ep, world, {**ep.valid, field: value})
    err = error_of(r)
    assert err["code"] == "invalid_value"
    assert err["field"] == named
    assert field in err["message"]


async def test_a_well_formed_uuid_is_accepted_where_a_malformed_one_is_not(
    api: Api, world: dict[str, str]
) -> None:
    # The other side of the malformed-UUID cases: a real id passes validation.
    ep = ENDPOINTS["mail"]
    body = {"to": ["claude@/srv/shop"], "subject": "Re", "body": "b", "parent_mail_id": "{mail_id}"}
    r = await call(api, ep, world, body)
    assert r.status_code == 201, r.text
    assert r.json()["session_id"] == world["session_id"]


# --- refused writes, seen through the API ---

VISIBLE = [
    ("mail", "claude", "/api/v1/agent/inbox?status=all"),
    ("mail", "ana", "/api/v1/sessions"),
    ("agent-mail", "ana", "/api/v1/mailbox"),
    ("admin-user", "admin", "/api/v1/admin/users"),
    ("admin-agent", "admin", "/api/v1/admin/agents"),
    ("session-patch", "ana", "/api/v1/sessions/{session_id}"),
]


@pytest.mark.parametrize(("ep_id", "viewer", "list_path"), VISIBLE)
async def test_a_refused_write_leaves_what_clients_see_unchanged(
    api: Api, world: dict[str, str], ep_id: str, viewer: str, list_path: str
) -> None:
    ep = ENDPOINTS[ep_id]
    path = fill(list_path, world)

    async def look() -> Any:
        r = await api.http.get(path, headers=api.auth(viewer))
        assert r.status_code == 200, r.text
        return r.json()

    before = await look()
    error_of(await call(api, ep, world, {**ep.valid, "attachment_id": "x"}))
    error_of(await call(api, ep, world, content=b"[]", headers=JSON))
    assert await look() == before
    r = await call(api, ep, world, ep.valid)  # the other side: a valid write shows up
    assert r.status_code == ep.ok_status, r.text
    assert await look() != before


# --- query parameters ---

QUERY_CASES = [
    ("/api/v1/agent/inbox", "claude", "limit=abc", "limit", "invalid_type"),
    ("/api/v1/agent/inbox", "claude", "limit=1.5", "limit", "invalid_type"),
    ("/api/v1/agent/inbox", "claude", "limit=0", "limit", "invalid_value"),
    ("/api/v1/agent/inbox", "claude", "limit=501", "limit", "invalid_value"),
    ("/api/v1/agent/inbox", "claude", "status=read", "status", "invalid_value"),
    ("/api/v1/agent/inbox", "claude", "mark_read=maybe", "mark_read", "invalid_type"),
    ("/api/v1/mailbox", "ana", "limit=abc", "limit", "invalid_type"),
    ("/api/v1/mailbox", "ana", "limit=0", "limit", "invalid_value"),
    ("/api/v1/sessions", "ana", "limit=-3", "limit", "invalid_value"),
]


@pytest.mark.parametrize(("path", "who", "query", "field", "code"), QUERY_CASES)
async def test_a_bad_query_parameter_is_refused_naming_it(
    api: Api, world: dict[str, str], path: str, who: str, query: str, field: str, code: str
) -> None:
    err = error_of(await api.http.get(f"{path}?{query}", headers=api.auth(who)))
    assert err["code"] == code
    assert err["field"] == field
    assert field in err["message"]


@pytest.mark.parametrize("limit", ["1", "500"])
async def test_limits_inside_the_range_are_accepted(
    api: Api, world: dict[str, str], limit: str
) -> None:
    r = await api.http.get(f"/api/v1/agent/inbox?limit={limit}", headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()["items"]] == [world["mail_id"]]


async def test_a_refused_inbox_listing_marks_nothing_read(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    with writes_nothing(settings):
        r = await api.http.get(
            "/api/v1/agent/inbox?mark_read=true&limit=abc", headers=api.auth("claude")
        )
    error_of(r)
    unread = await api.http.get("/api/v1/agent/inbox?status=unread", headers=api.auth("claude"))
    assert [m["id"] for m in unread.json()["items"]] == [world["mail_id"]]


async def test_a_negative_body_limit_is_refused_while_zero_means_the_whole_body(
    api: Api, world: dict[str, str]
) -> None:
    url = f"/api/v1/agent/mail/{world['mail_id']}?body_limit="
    err = error_of(await api.http.get(url + "-1", headers=api.auth("claude")))
    assert (err["code"], err["field"]) == ("invalid_value", "body_limit")
    for limit, body, truncated in (("0", "500s", False), ("2", "50", True)):
        r = await api.http.get(url + limit, headers=api.auth("claude"))
        assert r.status_code == 200, r.text
        assert (r.json()["body"], r.json()["body_truncated"]) == (body, truncated)


# --- inputs that were 500s: all must be 400s naming the field, before anything runs ---

CURSOR_ROUTES = [
    ("/api/v1/mailbox", "ana"),
    ("/api/v1/agent/inbox", "claude"),
    ("/api/v1/mail/{mail_id}/thread", "ana"),
    ("/api/v1/agent/mail/{mail_id}/thread?session_id={session_id}", "claude"),
    ("/api/v1/search?q=login", "ana"),
    ("/api/v1/agent/search?q=login&session_id={session_id}", "claude"),
    ("/api/v1/sessions", "ana"),
]
HUGE_CURSORS = [str(2**63), str(-(2**63) - 1), "1" + "0" * 40, "9" * 5000, "-1"]


@pytest.mark.parametrize(("path", "who"), CURSOR_ROUTES)
async def test_a_cursor_beyond_64_bits_is_a_400_on_every_cursor_route(
    api: Api, world: dict[str, str], path: str, who: str
) -> None:
    url = fill(path, world)
    joiner = "&" if "?" in url else "?"
    for cursor in HUGE_CURSORS:
        r = await api.http.get(f"{url}{joiner}cursor={cursor}", headers=api.auth(who))
        err = error_of(r)
        assert (err["code"], err["field"]) == ("invalid_value", "cursor"), (cursor, err)
    # The other side: a cursor the server gave out is still accepted.
    r = await api.http.get(f"{url}{joiner}limit=1", headers=api.auth(who))
    assert r.status_code == 200, r.text


def _first_text_field(body: dict[str, Any]) -> str:
    return next(k for k, v in body.items() if isinstance(v, str))


@pytest.mark.parametrize(
    "ep_id",
    [k for k, ep in ENDPOINTS.items() if any(isinstance(v, str) for v in ep.valid.values())],
)
async def test_a_lone_surrogate_escape_is_refused_naming_its_field(
    api: Api, world: dict[str, str], settings: Settings, ep_id: str
) -> None:
    ep = ENDPOINTS[ep_id]
    field = _first_text_field(ep.valid)
    raw = json.dumps({**fill(ep.valid, world), field: "MARK"}).replace("MARK", "x\\ud800y")
    with writes_nothing(settings):
        r = await call(api, ep, world, content=raw.encode(), headers=JSON)
    err = error_of(r)
    assert (err["code"], err["field"]) == ("invalid_value", field), err
    # The other side: a surrogate PAIR is an ordinary character (an emoji).
    if ep_id != "login":  # (login would then be a wrong password, not a 200)
        ok = json.dumps(fill(ep.valid, world)).replace('"Deploy"', '"\\ud83d\\ude80"')
        assert (await call(api, ep, world, content=ok.encode(), headers=JSON)).status_code < 400


async def test_a_lone_surrogate_in_a_list_item_and_in_a_key_is_named_by_its_path(
    api: Api, world: dict[str, str]
) -> None:
    ep = ENDPOINTS["mail"]
    raw = '{"to": ["claude@/srv/shop.new", "\\udc00"], "subject": "s", "body": "b"}'
    err = error_of(await call(api, ep, world, content=raw.encode(), headers=JSON))
    assert err["field"] == "to[1]"
    raw = '{"to": ["claude@/srv/shop.new"], "subject": "s", "body": "b", "\\ud800": 1}'
    err = error_of(await call(api, ep, world, content=raw.encode(), headers=JSON))
    assert err["field"] == "\\ud800"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/search?q=a%00b",
        "/api/v1/agent/search?q=login%00&session_id={session_id}",
        "/api/v1/mailbox?q=x%00",
    ],
)
async def test_a_nul_in_the_search_text_is_a_400_naming_q(
    api: Api, world: dict[str, str], path: str
) -> None:
    who = "claude" if "/agent/" in path else "ana"
    path = fill(path, world)
    err = error_of(await api.http.get(path, headers=api.auth(who)))
    assert (err["code"], err["field"]) == ("invalid_value", "q")
    r = await api.http.get(path.replace("%00", ""), headers=api.auth(who))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("path", "who"), [("/api/v1/agent/events", "claude"), ("/api/v1/events", "ana")]
)
@pytest.mark.parametrize("value", [str(2**63), "9" * 30, "9" * 5000])
async def test_a_last_event_id_beyond_64_bits_is_a_400_before_the_stream_starts(
    api: Api, world: dict[str, str], path: str, who: str, value: str
) -> None:
    r = await api.http.get(path, headers={**api.auth(who), "Last-Event-ID": value})
    assert r.headers["content-type"].startswith("application/json")
    err = error_of(r)
    assert (err["code"], err["field"]) == ("invalid_value", "Last-Event-ID")
