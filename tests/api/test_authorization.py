"""Who may read, decide, change the mode, archive and adopt — every route that
touches a session, from every side, in a random order (docs/access.md).

The world: ana starts a session with agent-a (whose owner she is) and names dora a
decider. agent-b, bob and the admin are outside it (the admin may read every
session by policy, but has no power in it). The expected answer of each (route,
identity) pair is computed from the rule below, not from the gateway's code.
Mutating calls get fresh objects (a new request, a new grant, a new platform
session), so the order of calls cannot change what a call should get.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio

IDENTITIES = ["anonymous", "agent", "other_agent", "owner", "decider", "other_human", "admin"]
NAMES = {
    "agent": "agent-a",
    "other_agent": "agent-b",
    "owner": "ana",
    "decider": "dora",
    "other_human": "bob",
    "admin": "admin",
}
# Who gets what, by the level a route needs (on human routes).
LEVELS = {
    "read": {"owner", "decider", "admin"},  # admins read every session
    "decide": {"owner", "decider"},
    "revoke": {"owner", "decider", "admin"},  # revoking only takes power away
    "name_deciders": {"owner"},
    "adopt": {"owner"},  # ana owns agent-a
    "admin": {"admin"},
}


@dataclass
class World:
    api: Api
    sid: str
    alias: str
    mail: str
    attachment: str
    counter: itertools.count[int]

    def fresh(self, prefix: str) -> str:
        return f"{prefix}-{next(self.counter)}"

    async def request(self) -> str:
        r = await self.api.http.post(
            "/api/v1/agent/permissions",
            json={
                "session_id": self.sid,
                "kind": "approval",
                "tool_name": "Bash",
                "tool_input": {"command": "make deploy"},
                "relay_key": self.fresh("req"),
            },
            headers=self.api.auth("agent-a"),
        )
        assert r.status_code == 201, r.text
        rid: str = r.json()["id"]
        return rid

    async def grant(self) -> str:
        rid = await self.request()
        r = await self.api.http.post(
            f"/api/v1/permissions/{rid}/decision",
            json={"decision": "approve", "always": True, "grant_pattern": self.fresh("cmd")},
            headers=self.api.auth("ana"),
        )
        assert r.status_code == 200, r.text
        gid: str = r.json()["grant_id"]
        return gid

    async def platform_session(self) -> str:
        slug = self.fresh("term")
        r = await self.api.http.post(
            "/api/v1/agent/heartbeat",
            json={"platform_sessions": [{"platform_id": slug, "slug": slug, "cwd": "/srv/shop"}]},
            headers=self.api.auth("agent-a"),
        )
        assert r.status_code == 200, r.text
        return slug


async def build(api: Api) -> World:
    for name in ("ana", "dora", "bob", "carl"):
        await api.user(name)
    await api.agent("agent-a", owners=["ana"])
    await api.agent("agent-b")
    up = await api.http.post(
        "/api/v1/attachments",
        files={"file": ("plan.txt", b"the plan", "text/plain")},
        headers=api.auth("ana"),
    )
    r = await api.send(
        "ana",
        ["agent-a@/srv/shop.new"],
        subject="Deploy plan",
        body="deploy the shop",
        attachment_ids=[up.json()["attachment_id"]],
    )
    assert r.status_code == 201, r.text
    m = r.json()
    d = await api.http.post(
        f"/api/v1/sessions/{m['session_id']}/deciders",
        json={"name": "dora"},
        headers=api.auth("ana"),
    )
    assert d.status_code == 201, d.text
    # agent-b works in the same workspace, in a session of its own.
    assert (await api.send("bob", ["agent-b@/srv/shop.new"], subject="other")).status_code == 201
    return World(
        api,
        m["session_id"],
        m["session_alias"],
        m["id"],
        up.json()["attachment_id"],
        itertools.count(),
    )


Call = Callable[[World, dict[str, str]], Awaitable[httpx.Response]]


@dataclass(frozen=True)
class Route:
    name: str
    kind: str  # "human" | "agent" | "admin"
    level: str  # a key of LEVELS, or "member" for agent routes
    call: Call
    # For lists: the call answers 200 to everyone allowed on the route, and this
    # says whether the world's object is in it.
    listed: Callable[[World, httpx.Response], bool] | None = None
    undo: Callable[[World], Awaitable[None]] | None = None


def get(path: str, **params: str) -> Call:
    async def call(w: World, h: dict[str, str]) -> httpx.Response:
        p = {k: v.format(sid=w.sid) for k, v in params.items()}
        url = path.format(sid=w.sid, mail=w.mail, att=w.attachment, alias=w.alias)
        return await w.api.http.get(url, params=p, headers=h)

    return call


async def _decide(w: World, h: dict[str, str]) -> httpx.Response:
    rid = await w.request()
    return await w.api.http.post(
        f"/api/v1/permissions/{rid}/decision", json={"decision": "deny", "note": "n"}, headers=h
    )


async def _always(w: World, h: dict[str, str]) -> httpx.Response:
    rid = await w.request()
    return await w.api.http.post(
        f"/api/v1/permissions/{rid}/decision",
        json={"decision": "approve", "always": True, "grant_pattern": w.fresh("p")},
        headers=h,
    )


async def _revoke(w: World, h: dict[str, str]) -> httpx.Response:
    gid = await w.grant()
    return await w.api.http.delete(f"/api/v1/grants/{gid}", headers=h)


async def _mode(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.patch(
        f"/api/v1/sessions/{w.sid}", json={"permission_mode": "workspace"}, headers=h
    )


async def _archive(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.patch(f"/api/v1/sessions/{w.sid}", json={"archived": True}, headers=h)


async def _unarchive(w: World) -> None:
    r = await w.api.http.patch(
        f"/api/v1/sessions/{w.sid}", json={"archived": False}, headers=w.api.auth("ana")
    )
    assert r.status_code == 200, r.text


async def _rename(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.patch(f"/api/v1/sessions/{w.sid}", json={"alias": w.alias}, headers=h)


async def _add_decider(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.post(
        f"/api/v1/sessions/{w.sid}/deciders", json={"name": "carl"}, headers=h
    )


async def _remove_carl(w: World) -> None:
    r = await w.api.http.delete(
        f"/api/v1/sessions/{w.sid}/deciders/carl", headers=w.api.auth("ana")
    )
    assert r.status_code == 200, r.text


async def _adopt(w: World, h: dict[str, str]) -> httpx.Response:
    slug = await w.platform_session()
    return await w.api.http.post(
        "/api/v1/mail",
        json={"to": [f"agent-a@/srv/shop.{slug}"], "subject": "mine", "body": "b"},
        headers=h,
    )


async def _ask(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": w.sid,
            "kind": "question",
            "question": "which db?",
            "relay_key": w.fresh("q"),
        },
        headers=h,
    )


async def _add_owner(w: World, h: dict[str, str]) -> httpx.Response:
    return await w.api.http.post(
        "/api/v1/admin/agents/agent-b/owners", json={"name": "carl"}, headers=h
    )


def _has(key: str, value: Callable[[World], str]) -> Callable[[World, httpx.Response], bool]:
    return lambda w, r: any(item.get(key) == value(w) for item in r.json()["items"])


def _pending_listed(w: World, r: httpx.Response) -> bool:
    return any(item["session_id"] == w.sid for item in r.json()["items"])


def _adoptable_listed(w: World, r: httpx.Response) -> bool:
    return any(s["adoptable"] for s in r.json()["sessions"])


ROUTES = [
    Route("get session", "human", "read", get("/api/v1/sessions/{sid}")),
    Route("read mail", "human", "read", get("/api/v1/mail/{mail}")),
    Route("thread", "human", "read", get("/api/v1/mail/{mail}/thread")),
    Route("download", "human", "read", get("/api/v1/attachments/{att}")),
    Route("deciders", "human", "read", get("/api/v1/sessions/{sid}/deciders")),
    Route("list sessions", "human", "read", get("/api/v1/sessions"), _has("id", lambda w: w.sid)),
    Route(
        "search",
        "human",
        "read",
        get("/api/v1/search", q="deploy"),
        _has("id", lambda w: w.mail),
    ),
    Route(
        "list grants",
        "human",
        "read",
        get("/api/v1/grants", session_id="{sid}"),
        _has("session_id", lambda w: w.sid),
    ),
    Route(
        "list pending",
        "human",
        "decide",
        get("/api/v1/permissions", status="pending"),
        _pending_listed,
    ),
    Route("deny", "human", "decide", _decide),
    Route("approve always", "human", "decide", _always),
    Route("revoke grant", "human", "revoke", _revoke),
    Route("change mode", "human", "decide", _mode),
    Route("archive", "human", "decide", _archive, undo=_unarchive),
    Route("rename", "human", "decide", _rename),
    Route("add decider", "human", "name_deciders", _add_decider, undo=_remove_carl),
    Route("adopt", "human", "adopt", _adopt),
    Route(
        "see adoptable",
        "human",
        "adopt",
        get("/api/v1/contacts/suggest", q="agent-a@/srv/shop."),
        _adoptable_listed,
    ),
    Route(
        "agent read mail", "agent", "member", get("/api/v1/agent/mail/{mail}", session_id="{sid}")
    ),
    Route(
        "agent thread",
        "agent",
        "member",
        get("/api/v1/agent/mail/{mail}/thread", session_id="{sid}"),
    ),
    Route(
        "agent participants",
        "agent",
        "member",
        get("/api/v1/agent/sessions/{sid}/participants", session_id="{sid}"),
    ),
    Route("agent session", "agent", "member", get("/api/v1/agent/sessions/{sid}")),
    Route(
        "agent download",
        "agent",
        "member",
        get("/api/v1/agent/attachments/{att}", session_id="{sid}"),
    ),
    Route(
        "agent search",
        "agent",
        "member",
        get("/api/v1/agent/search", q="deploy", session_id="{sid}"),
    ),
    Route("agent asks", "agent", "member", _ask),
    Route("admin agents", "admin", "admin", get("/api/v1/admin/agents")),
    Route("admin owners", "admin", "admin", _add_owner),
]


def expected(route: Route, identity: str) -> int | bool:
    """The status a call must get, or for lists whether the object is in it."""
    if identity == "anonymous":
        return 401
    is_agent = identity in ("agent", "other_agent")
    if route.kind == "agent":
        if not is_agent:
            return 403
        return 200 if identity == "agent" else 404
    if is_agent:
        return 403
    if route.kind == "admin":
        return 200 if identity == "admin" else 403
    allowed = identity in LEVELS[route.level]
    if route.listed is not None:
        return allowed
    if allowed:
        return 200
    if route.level == "adopt":
        return 404  # to anyone but the agent's owners the slug is an unknown alias
    return 403 if identity in LEVELS["read"] else 404


def headers(w: World, identity: str) -> dict[str, str]:
    return {} if identity == "anonymous" else w.api.auth(NAMES[identity])


@pytest.mark.parametrize("seed", [1, 99])
async def test_every_route_from_every_side_in_a_random_order(api: Api, seed: int) -> None:
    w = await build(api)
    pairs = [(r, i) for r in ROUTES for i in IDENTITIES]
    random.Random(seed).shuffle(pairs)
    wrong = []
    for route, identity in pairs:
        r = await route.call(w, headers(w, identity))
        want = expected(route, identity)
        if route.listed is not None and r.status_code == 200:
            got: int | bool = route.listed(w, r)
        else:
            got = 200 if 200 <= r.status_code < 300 else r.status_code
        if got != want:
            wrong.append((route.name, identity, want, r.status_code, r.text[:200]))
        if 200 <= r.status_code < 300 and route.undo is not None:
            await route.undo(w)
    assert not wrong, wrong
    # Every level must be both granted and refused somewhere, or the test proves nothing.
    outcomes = {(r.level, expected(r, i) in (200, True)) for r in ROUTES for i in IDENTITIES}
    assert {lvl for lvl, ok in outcomes if ok} == {lvl for lvl, ok in outcomes if not ok}
