"""Who may do what, each rule from both sides: the refused caller AND the allowed one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.client.sse import SSEParser
from mailui4agents.settings import Settings
from tests.api.test_strict_input import writes_nothing
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def world(api: Api) -> dict[str, str]:
    """Agents claude and codex, users ana and bob (not admins). Ana has one session
    with each agent; bob and the other agent are outside it."""
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    await api.user("bob")
    r1 = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login", body="for claude")
    r2 = await api.send("ana", ["codex@/srv/web.new"], subject="Fix css", body="for codex")
    assert r1.status_code == r2.status_code == 201, (r1.text, r2.text)
    m1, m2 = r1.json(), r2.json()
    return {
        "claude_mail": m1["id"],
        "claude_session": m1["session_id"],
        "claude_alias": m1["session_alias"],
        "codex_mail": m2["id"],
        "codex_session": m2["session_id"],
    }


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # may name keys of `world`
    body: dict[str, Any] | None = None
    ok: int = 200

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


async def hit(api: Api, route: Route, world: dict[str, str], who: str, **headers: str) -> Any:
    path = route.path.format(**world)
    hdrs = {**api.auth(who), **headers}
    if route.body is None:
        return await api.http.request(route.method, path, headers=hdrs)
    return await api.http.request(route.method, path, json=route.body, headers=hdrs)


def error_code(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    code: str = r.json()["error"]["code"]
    return code


HUMAN_ROUTES = [
    Route(
        "POST", "/api/v1/mail", {"to": ["claude@/srv/shop.new"], "subject": "s", "body": "b"}, 201
    ),
    Route("GET", "/api/v1/mailbox"),
    Route("GET", "/api/v1/mail/{claude_mail}"),
    Route("GET", "/api/v1/mail/{claude_mail}/thread"),
    Route("GET", "/api/v1/sessions"),
    Route("GET", "/api/v1/sessions/{claude_session}"),
    Route("PATCH", "/api/v1/sessions/{claude_session}", {"alias": "renamed"}),
    Route("POST", "/api/v1/auth/tokens", {"name": "laptop"}, 201),
    Route("GET", "/api/v1/auth/tokens"),
]
ADMIN_ROUTES = [
    Route("GET", "/api/v1/admin/users"),
    Route("GET", "/api/v1/admin/agents"),
    Route("POST", "/api/v1/admin/users", {"username": "cy", "password": "cy-password"}, 201),
    Route("POST", "/api/v1/admin/agents", {"name": "gemini"}, 201),
    Route("POST", "/api/v1/admin/agents/claude/keys", None, 201),
    Route("DELETE", "/api/v1/admin/agents/claude/keys/{spare_key}"),
]
AGENT_ROUTES = [
    Route("GET", "/api/v1/agent/inbox"),
    Route(
        "POST", "/api/v1/agent/mail", {"to": ["ana@/srv/shop"], "subject": "s", "body": "b"}, 201
    ),
    Route("POST", "/api/v1/agent/heartbeat", {"status": "idle"}),
    Route("POST", "/api/v1/agent/inbox/read", {"session_id": "{claude_session}"}),
    Route("GET", "/api/v1/agent/mail/{claude_mail}"),
    Route("GET", "/api/v1/agent/mail/{claude_mail}/thread?session_id={claude_session}"),
]


async def key_ids(api: Api, agent: str) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/admin/agents", headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    [row] = [a for a in r.json()["items"] if a["name"] == agent]
    keys: list[dict[str, Any]] = row["keys"]
    return keys


async def spare_key(api: Api, world: dict[str, str]) -> dict[str, str]:
    """Rotate a spare key for claude, so the DELETE route has something to revoke
    (with a grace period: claude's own key keeps working for the test)."""
    r = await api.http.post(
        "/api/v1/admin/agents/claude/keys?grace_s=3600", headers=api.auth("admin")
    )
    assert r.status_code == 201, r.text
    [spare] = [k for k in await key_ids(api, "claude") if r.json()["key"].startswith(k["prefix"])]
    return {**world, "spare_key": spare["key_id"]}


def fill_body(route: Route, world: dict[str, str]) -> Route:
    if route.body is None:
        return route
    body = {k: v.format(**world) if isinstance(v, str) else v for k, v in route.body.items()}
    return Route(route.method, route.path, body, route.ok)


# --- principal kinds: agents stay on agent routes, humans on human routes ---


@pytest.mark.parametrize("route", HUMAN_ROUTES + ADMIN_ROUTES, ids=str)
async def test_an_agent_key_is_forbidden_on_human_routes_where_a_user_token_works(
    api: Api, world: dict[str, str], settings: Settings, route: Route
) -> None:
    world = await spare_key(api, world)
    user = "admin" if "/admin/" in route.path else "ana"
    with writes_nothing(settings):
        refused = await hit(api, route, world, "claude")
    assert error_code(refused, 403) == "forbidden"
    allowed = await hit(api, route, world, user)
    assert allowed.status_code == route.ok, allowed.text


@pytest.mark.parametrize("route", AGENT_ROUTES, ids=str)
@pytest.mark.parametrize("user", ["ana", "admin"])
async def test_a_user_token_is_forbidden_on_agent_routes_where_the_agent_key_works(
    api: Api, world: dict[str, str], settings: Settings, route: Route, user: str
) -> None:
    route = fill_body(route, world)
    with writes_nothing(settings):
        refused = await hit(api, route, world, user)
    assert error_code(refused, 403) == "forbidden"
    allowed = await hit(api, route, world, "claude")
    assert allowed.status_code == route.ok, allowed.text


@pytest.mark.parametrize("route", ADMIN_ROUTES, ids=str)
async def test_a_non_admin_user_is_forbidden_on_admin_routes_where_an_admin_works(
    api: Api, world: dict[str, str], settings: Settings, route: Route
) -> None:
    world = await spare_key(api, world)
    with writes_nothing(settings):
        refused = await hit(api, route, world, "bob")
    assert error_code(refused, 403) == "forbidden"
    allowed = await hit(api, route, world, "admin")
    assert allowed.status_code == route.ok, allowed.text


async def test_the_event_streams_refuse_the_other_kind_of_principal(
    api: Api, world: dict[str, str]
) -> None:
    # In-process an opened stream would never return (the e2e test below has the open
    # side), so a broken guard must fail here on a deadline, not hang.
    for path, who in (("/api/v1/events", "claude"), ("/api/v1/agent/events", "ana")):
        with anyio.fail_after(10):
            r = await api.http.get(path, headers=api.auth(who))
        assert error_code(r, 403) == "forbidden"


@pytest.mark.e2e
async def test_each_event_stream_opens_for_its_own_kind_of_principal_only(live: Api) -> None:
    await live.agent("claude")
    await live.user("ana")
    cases = [
        ("/api/v1/events", "ana", 200),
        ("/api/v1/events", "claude", 403),
        ("/api/v1/agent/events", "claude", 200),
        ("/api/v1/agent/events", "ana", 403),
    ]
    for path, who, status in cases:
        with anyio.fail_after(30):
            async with live.http.stream("GET", path, headers=live.auth(who)) as r:
                assert r.status_code == status, (path, who, await r.aread())


# --- what an agent can see ---


async def test_an_agent_inbox_lists_only_its_own_mail(api: Api, world: dict[str, str]) -> None:
    for agent, mine, other_session in (
        ("claude", "claude_mail", "codex_session"),
        ("codex", "codex_mail", "claude_session"),
    ):
        r = await api.http.get("/api/v1/agent/inbox?status=all", headers=api.auth(agent))
        assert [m["id"] for m in r.json()["items"]] == [world[mine]]
        r = await api.http.get(
            f"/api/v1/agent/inbox?status=all&session_id={world[other_session]}",
            headers=api.auth(agent),
        )
        assert r.json()["items"] == []


@pytest.mark.parametrize(
    "suffix", ["", "/thread?session_id={codex_session}", "?session_id={codex_session}"]
)
async def test_an_agent_cannot_read_mail_of_a_session_it_is_not_in_but_the_recipient_can(
    api: Api, world: dict[str, str], suffix: str
) -> None:
    path = f"/api/v1/agent/mail/{world['codex_mail']}{suffix.format(**world)}"
    refused = await api.http.get(path, headers=api.auth("claude"))
    assert error_code(refused, 404) == "not_found"
    # Indistinguishable from a mail that does not exist.
    missing = "00000000-0000-4000-8000-000000000000"
    ghost = await api.http.get(
        path.replace(world["codex_mail"], missing), headers=api.auth("claude")
    )
    assert refused.json()["error"]["message"].replace(world["codex_mail"], "X") == ghost.json()[
        "error"
    ]["message"].replace(missing, "X")
    allowed = await api.http.get(path, headers=api.auth("codex"))
    assert allowed.status_code == 200, allowed.text
    body = allowed.json()
    items = body["items"] if suffix.startswith("/thread") else [body]
    assert [m["id"] for m in items] == [world["codex_mail"]]


async def test_reading_anothers_mail_is_refused_without_marking_it_read(
    api: Api, world: dict[str, str]
) -> None:
    await api.http.get(f"/api/v1/agent/mail/{world['codex_mail']}", headers=api.auth("claude"))
    r = await api.http.post(
        "/api/v1/agent/inbox/read",
        json={"mail_ids": [world["codex_mail"]], "session_id": world["codex_session"]},
        headers=api.auth("claude"),
    )
    assert r.json() == {"marked": 0}
    r = await api.http.get("/api/v1/agent/inbox?status=unread", headers=api.auth("codex"))
    assert [m["id"] for m in r.json()["items"]] == [world["codex_mail"]]


async def test_an_agent_cannot_reply_into_a_session_it_is_not_in_but_the_recipient_can(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    with writes_nothing(settings):
        refused = await api.send(
            "claude", ["ana@/srv/web"], subject="Re", parent_mail_id=world["codex_mail"]
        )
    assert error_code(refused, 400) == "invalid_value"
    assert refused.json()["error"]["field"] == "parent_mail_id"
    allowed = await api.send(
        "codex", ["ana@/srv/web"], subject="Re", parent_mail_id=world["codex_mail"]
    )
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["session_id"] == world["codex_session"]


# --- what a human can see and change ---


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sessions/{claude_session}",
        "/api/v1/mail/{claude_mail}",
        "/api/v1/mail/{claude_mail}/thread",
    ],
)
async def test_a_human_outside_a_session_cannot_read_it_but_a_participant_and_an_admin_can(
    api: Api, world: dict[str, str], path: str
) -> None:
    url = path.format(**world)
    assert error_code(await api.http.get(url, headers=api.auth("bob")), 404) == "not_found"
    for who in ("ana", "admin"):
        r = await api.http.get(url, headers=api.auth(who))
        assert r.status_code == 200, (who, r.text)


async def test_a_human_session_list_shows_only_sessions_they_are_in(
    api: Api, world: dict[str, str]
) -> None:
    ids = {}
    for who in ("ana", "bob"):
        r = await api.http.get("/api/v1/sessions", headers=api.auth(who))
        ids[who] = {s["id"] for s in r.json()["items"]}
    assert ids == {"ana": {world["claude_session"], world["codex_session"]}, "bob": set()}


async def test_a_human_outside_a_session_cannot_change_it_but_a_participant_can(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    url = f"/api/v1/sessions/{world['claude_session']}"
    for body in ({"alias": "stolen"}, {"permission_mode": "full"}, {"archived": True}):
        with writes_nothing(settings):
            r = await api.http.patch(url, json=body, headers=api.auth("bob"))
        assert r.status_code in (403, 404), r.text
    r = await api.http.patch(url, json={"alias": "mine"}, headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    assert r.json()["alias"] == "mine"


async def test_a_human_outside_a_session_gets_the_same_404_from_patch_as_from_get(
    api: Api, world: dict[str, str]
) -> None:
    url = f"/api/v1/sessions/{world['claude_session']}"
    got = await api.http.get(url, headers=api.auth("bob"))
    patched = await api.http.patch(url, json={"archived": True}, headers=api.auth("bob"))
    assert (patched.status_code, patched.json()["error"]["code"]) == (
        got.status_code,
        got.json()["error"]["code"],
    )


@pytest.mark.parametrize(
    ("outsider", "read_path"), [("bob", "/api/v1/mail/{}"), ("codex", "/api/v1/agent/mail/{}")]
)
async def test_an_outsider_cannot_read_a_sessions_history_by_mailing_its_alias(
    api: Api, world: dict[str, str], outsider: str, read_path: str
) -> None:
    # Whether the gateway refuses the mail or just delivers it, the earlier mail stays private.
    await api.send(outsider, [f"claude@/srv/shop.{world['claude_alias']}"], subject="hello")
    r = await api.http.get(read_path.format(world["claude_mail"]), headers=api.auth(outsider))
    assert error_code(r, 404) == "not_found"


# --- keys: revocation, rotation, binding ---


async def test_a_revoked_key_is_unauthorized_while_a_rotated_key_of_the_same_agent_works(
    api: Api, world: dict[str, str]
) -> None:
    old_key = api.tokens["claude"]
    [old] = await key_ids(api, "claude")
    rotated = await api.http.post(
        "/api/v1/admin/agents/claude/keys?grace_s=3600", headers=api.auth("admin")
    )
    assert rotated.status_code == 201, rotated.text
    new_key = rotated.json()["key"]
    assert new_key.startswith("am_agent_") and new_key != old_key

    def as_key(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    for key in (old_key, new_key):  # a grace period: both work until it ends or a revoke
        r = await api.http.get("/api/v1/agent/inbox", headers=as_key(key))
        assert r.status_code == 200, r.text

    r = await api.http.delete(
        f"/api/v1/admin/agents/claude/keys/{old['key_id']}", headers=api.auth("admin")
    )
    assert r.status_code == 200, r.text

    for method, path in (("GET", "/api/v1/agent/inbox"), ("POST", "/api/v1/agent/heartbeat")):
        kw: dict[str, Any] = {"json": {}} if method == "POST" else {}
        r = await api.http.request(method, path, headers=as_key(old_key), **kw)
        assert error_code(r, 401) == "unauthorized"
        assert r.headers["www-authenticate"].lower().startswith("bearer")
        r = await api.http.request(method, path, headers=as_key(new_key), **kw)
        assert r.status_code == 200, r.text

    keys = {k["key_id"]: k["revoked_at"] for k in await key_ids(api, "claude")}
    assert keys[old["key_id"]] is not None
    assert [v for k, v in keys.items() if k != old["key_id"]] == [None]


async def test_a_key_can_be_revoked_only_through_its_own_agent_and_only_once(
    api: Api, world: dict[str, str]
) -> None:
    [claude_key] = await key_ids(api, "claude")
    url = "/api/v1/admin/agents/{}/keys/" + claude_key["key_id"]
    r = await api.http.delete(url.format("codex"), headers=api.auth("admin"))
    assert error_code(r, 404) == "not_found"
    r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert r.status_code == 200, r.text  # still valid: the wrong agent's route revoked nothing
    r = await api.http.delete(url.format("claude"), headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    r = await api.http.delete(url.format("claude"), headers=api.auth("admin"))
    assert error_code(r, 404) == "not_found"


@pytest.mark.parametrize("how", ["header", "query"])
async def test_a_key_claimed_for_another_agent_is_forbidden_naming_the_bound_agent(
    api: Api, world: dict[str, str], how: str
) -> None:
    def claim(name: str) -> tuple[str, dict[str, str]]:
        if how == "header":
            return "/api/v1/agent/inbox", {**api.auth("claude"), "X-Agent-Name": name}
        return f"/api/v1/agent/inbox?agent={name}", api.auth("claude")

    path, headers = claim("codex")
    r = await api.http.get(path, headers=headers)
    assert error_code(r, 403) == "forbidden"
    message = r.json()["error"]["message"]
    assert "'claude'" in message and "'codex'" in message
    path, headers = claim("claude")  # the right name is fine
    r = await api.http.get(path, headers=headers)
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()["items"]] == [world["claude_mail"]]


BAD_AUTH: list[dict[str, str]] = [
    {},
    {"Authorization": ""},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer    "},
    {"Authorization": "Basic YWRtaW46YWRtaW4="},
    {"Authorization": "Token am_agent_x"},
    {"Authorization": "garbage"},
    {"Authorization": "Bearer garbage"},
    {"Authorization": "Bearer am_agent_notarealkey"},
    {"Authorization": "Bearer am_user_notarealtoken"},
]


@pytest.mark.parametrize(
    "headers", BAD_AUTH, ids=lambda h: h.get("Authorization", "none") or "empty"
)
@pytest.mark.parametrize("path", ["/api/v1/agent/inbox", "/api/v1/mailbox", "/api/v1/admin/users"])
async def test_a_missing_or_garbage_authorization_is_unauthorized(
    api: Api, world: dict[str, str], path: str, headers: dict[str, str]
) -> None:
    r = await api.http.get(path, headers=headers)
    assert error_code(r, 401) == "unauthorized"
    assert r.headers["www-authenticate"].lower().startswith("bearer")


async def test_an_anonymous_write_is_unauthorized_and_writes_nothing(
    api: Api, world: dict[str, str], settings: Settings
) -> None:
    body = {"to": ["claude@/srv/shop.new"], "subject": "s", "body": "b"}
    for path in ("/api/v1/mail", "/api/v1/agent/mail"):
        with writes_nothing(settings):
            r = await api.http.post(path, json=body)
        assert error_code(r, 401) == "unauthorized"


# --- mark-read scope ---


async def two_sessions_of_unread_mail(api: Api) -> dict[str, list[str]]:
    """Ana sends claude two mails in session A and two in session B."""
    await api.agent("claude")
    await api.user("ana")
    ids: dict[str, list[str]] = {"A": [], "B": []}
    for name, workspace in (("A", "/srv/a"), ("B", "/srv/b")):
        r = await api.send("ana", [f"claude@{workspace}.new"], subject=f"task {name}")
        assert r.status_code == 201, r.text
        first = r.json()
        r = await api.send("ana", [first["to"][0]], subject=f"more {name}")
        assert r.status_code == 201, r.text
        assert r.json()["session_id"] == first["session_id"]
        ids[name] = [first["id"], r.json()["id"]]
        ids[name + "_session"] = [first["session_id"]]
    return ids


async def unread_by_session(api: Api, who: str, session: str | None = None) -> list[str]:
    q = "" if session is None else f"&session_id={session}"
    r = await api.http.get(f"/api/v1/agent/inbox?status=unread{q}", headers=api.auth(who))
    assert r.status_code == 200, r.text
    return [m["id"] for m in r.json()["items"]]


async def test_listing_one_session_with_mark_read_leaves_the_other_session_unread(
    api: Api,
) -> None:
    ids = await two_sessions_of_unread_mail(api)
    [a], [b] = ids["A_session"], ids["B_session"]
    r = await api.http.get(
        f"/api/v1/agent/inbox?session_id={a}&mark_read=true", headers=api.auth("claude")
    )
    assert r.status_code == 200, r.text
    listed = r.json()["items"]
    assert [m["id"] for m in listed] == ids["A"]
    assert all(m["read"] is False for m in listed)  # read state as it was when listed

    assert await unread_by_session(api, "claude") == ids["B"]
    assert await unread_by_session(api, "claude", a) == []
    assert await unread_by_session(api, "claude", b) == ids["B"]
    r = await api.http.get("/api/v1/agent/inbox?status=all", headers=api.auth("claude"))
    flags = {m["id"]: m["read"] for m in r.json()["items"]}
    assert flags == {ids["A"][0]: True, ids["A"][1]: True, ids["B"][0]: False, ids["B"][1]: False}
    # The unread list and the read flags count the same mail.
    assert len(await unread_by_session(api, "claude")) == sum(not v for v in flags.values())


async def test_listing_without_mark_read_marks_nothing(api: Api) -> None:
    ids = await two_sessions_of_unread_mail(api)
    [a] = ids["A_session"]
    r = await api.http.get(f"/api/v1/agent/inbox?session_id={a}", headers=api.auth("claude"))
    assert [m["id"] for m in r.json()["items"]] == ids["A"]
    assert await unread_by_session(api, "claude") == ids["A"] + ids["B"]


async def test_mark_read_with_a_limit_marks_only_the_listed_page(api: Api) -> None:
    ids = await two_sessions_of_unread_mail(api)
    [a] = ids["A_session"]
    r = await api.http.get(
        f"/api/v1/agent/inbox?session_id={a}&mark_read=true&limit=1", headers=api.auth("claude")
    )
    assert [m["id"] for m in r.json()["items"]] == ids["A"][:1]
    assert r.json()["next_cursor"] is not None
    assert await unread_by_session(api, "claude") == ids["A"][1:] + ids["B"]


async def test_marking_mail_ids_read_marks_only_those(api: Api) -> None:
    ids = await two_sessions_of_unread_mail(api)
    chosen = [ids["A"][0], ids["B"][1]]
    r = await api.http.post(
        "/api/v1/agent/inbox/read", json={"mail_ids": chosen}, headers=api.auth("claude")
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"marked": 2}
    assert await unread_by_session(api, "claude") == [ids["A"][1], ids["B"][0]]
    r = await api.http.post(  # again: nothing left to mark
        "/api/v1/agent/inbox/read", json={"mail_ids": chosen}, headers=api.auth("claude")
    )
    assert r.json() == {"marked": 0}


async def test_marking_a_session_read_marks_only_that_session(api: Api) -> None:
    ids = await two_sessions_of_unread_mail(api)
    [b] = ids["B_session"]
    r = await api.http.post(
        "/api/v1/agent/inbox/read", json={"session_id": b}, headers=api.auth("claude")
    )
    assert r.json() == {"marked": 2}
    assert await unread_by_session(api, "claude") == ids["A"]


async def test_a_humans_session_unread_counts_agree_with_the_mailbox(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    sessions: list[str] = []
    mails: list[str] = []
    for ws in ("/srv/a", "/srv/b"):
        r = await api.send("claude", [f"ana@{ws}"], subject="report")
        assert r.status_code == 201, r.text
        sessions.append(r.json()["session_id"])
        r2 = await api.send("claude", [f"ana@{ws}"], subject="report 2")
        mails += [r.json()["id"], r2.json()["id"]]
    r = await api.http.get(f"/api/v1/mail/{mails[0]}", headers=api.auth("ana"))  # reads one
    assert r.status_code == 200, r.text

    listed = await api.http.get("/api/v1/sessions", headers=api.auth("ana"))
    counts = {s["id"]: s["unread"] for s in listed.json()["items"]}
    for sid in sessions:
        r = await api.http.get(
            f"/api/v1/mailbox?status=unread&session_id={sid}", headers=api.auth("ana")
        )
        assert counts[sid] == len(r.json()["items"])
    assert counts == {sessions[0]: 1, sessions[1]: 2}


@pytest.mark.e2e
async def test_revoking_a_key_stops_its_open_event_stream(live: Api) -> None:
    await live.agent("claude")
    await live.user("ana")
    [old] = await key_ids(live, "claude")
    got: list[str] = []
    headers = {**live.auth("claude"), "Accept": "text/event-stream"}
    parser = SSEParser()
    with anyio.move_on_after(5):  # long enough for a delivered event to arrive
        async with live.http.stream("GET", "/api/v1/agent/events", headers=headers) as r:
            assert r.status_code == 200
            revoked = await live.http.delete(
                f"/api/v1/admin/agents/claude/keys/{old['key_id']}", headers=live.auth("admin")
            )
            assert revoked.status_code == 200, revoked.text
            sent = await live.send("ana", ["claude@/srv/shop.new"], subject="after revocation")
            assert sent.status_code == 201, sent.text
            async for chunk in r.aiter_raw():
                got += [ev.event for ev in parser.feed(chunk) if ev.id is not None]
    assert "new_mail" not in got
