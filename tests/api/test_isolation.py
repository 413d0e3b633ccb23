"""Workspace isolation (docs/access.md), checked exhaustively on random worlds.

Several agents, several workspaces, many sessions; every agent read endpoint is
called with every (agent, scope, target) combination, and what the gateway allows
must equal what the rule, computed here independently, allows.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio

AGENTS = ["a1", "a2", "a3"]
WORKSPACES = ["/w/alpha", "/w/beta", ""]


@dataclass
class World:
    sessions: list[str] = field(default_factory=list)
    workspace: dict[str, str] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    mail: dict[str, str] = field(default_factory=dict)
    attachment: dict[str, str] = field(default_factory=dict)


async def build(api: Api, rng: random.Random, count: int) -> World:
    for name in AGENTS:
        await api.agent(name)
    await api.user("h1")
    world = World()
    for i in range(count):
        ws = rng.choice(WORKSPACES)
        chosen = rng.sample(AGENTS, rng.randint(1, 2))
        up = await api.http.post(
            "/api/v1/attachments",
            files={"file": (f"spec-{i}.txt", f"spec {i}".encode(), "text/plain")},
            headers=api.auth("h1"),
        )
        assert up.status_code == 201, up.text
        r = await api.send(
            "h1",
            [f"{a}@{ws}.new" for a in chosen],
            subject=f"task {i}",
            attachment_ids=[up.json()["attachment_id"]],
        )
        assert r.status_code == 201, r.text
        m = r.json()
        sid = m["session_id"]
        world.sessions.append(sid)
        world.workspace[sid] = ws
        world.members[sid] = set(chosen)
        world.mail[sid] = m["id"]
        world.attachment[sid] = up.json()["attachment_id"]
    return world


def allowed(world: World, agent: str, scope: str | None, target: str) -> bool:
    """The rule, written independently of the gateway's code. Without a scope an
    agent reads only mail addressed to it (every agent of a world session is a
    recipient of its one mail), and only on the endpoints in ADDRESSED."""
    if agent not in world.members[target]:
        return False
    if scope is None:
        return True
    return agent in world.members[scope] and world.workspace[scope] == world.workspace[target]


# The endpoints an unscoped agent may use at all; the others answer 400 naming session_id.
ADDRESSED = {"read_mail", "download_attachment"}


# Each agent read endpoint as the URL that reads `target` (a session of the world).
ENDPOINTS: dict[str, Callable[[World, str], str]] = {
    "read_mail": lambda w, t: f"/api/v1/agent/mail/{w.mail[t]}",
    "thread": lambda w, t: f"/api/v1/agent/mail/{w.mail[t]}/thread",
    "participants": lambda w, t: f"/api/v1/agent/sessions/{t}/participants",
    "download_attachment": lambda w, t: f"/api/v1/agent/attachments/{w.attachment[t]}",
}


def _params(scope: str | None) -> dict[str, str]:
    return {} if scope is None else {"session_id": scope}


async def call(api: Api, url: str, agent: str, scope: str | None) -> httpx.Response:
    return await api.http.get(url, params=_params(scope), headers=api.auth(agent))


@pytest.mark.parametrize("seed", [11, 404])
async def test_search_returns_exactly_the_mail_the_rule_allows(api: Api, seed: int) -> None:
    rng = random.Random(seed)
    world = await build(api, rng, count=8)
    for agent in AGENTS:
        for scope in [None, *world.sessions]:
            r = await api.http.get(
                "/api/v1/agent/search",
                params={"q": "task", "limit": "500", **_params(scope)},
                headers=api.auth(agent),
            )
            if scope is not None and agent not in world.members[scope]:
                assert r.status_code == 404, r.text
                continue
            if scope is None:
                assert r.status_code == 400, r.text  # search always needs the scope
                assert r.json()["error"]["field"] == "session_id"
                continue
            assert r.status_code == 200, r.text
            got = {m["id"] for m in r.json()["items"]}
            want = {world.mail[t] for t in world.sessions if allowed(world, agent, scope, t)}
            assert got == want, (agent, scope)


@pytest.mark.timeout(600)  # hundreds of reads; ~2 min each on a loaded 2-core machine
@pytest.mark.parametrize("seed", [7, 2026])
async def test_every_agent_read_endpoint_allows_exactly_the_rule(api: Api, seed: int) -> None:
    rng = random.Random(seed)
    world = await build(api, rng, count=8)
    mismatches: list[tuple[object, ...]] = []
    checked = 0
    for name, url_of in ENDPOINTS.items():
        for agent in AGENTS:
            for scope in [None, *world.sessions]:
                for target in world.sessions:
                    r = await call(api, url_of(world, target), agent, scope)
                    want = allowed(world, agent, scope, target)
                    got = r.status_code == 200
                    if scope is None and name not in ADDRESSED:
                        if r.status_code != 400:
                            mismatches.append((name, agent, scope, target, r.status_code, 400))
                    elif r.status_code not in (200, 404):
                        mismatches.append((name, agent, scope, target, r.status_code, r.text))
                    elif got != want:
                        mismatches.append((name, agent, scope, target, r.status_code, want))
                    checked += 1
    assert checked == len(ENDPOINTS) * len(AGENTS) * (len(world.sessions) + 1) * len(world.sessions)
    assert not mismatches, mismatches[:5]
    # The world must exercise both outcomes, or the test proves nothing.
    outcomes = {
        allowed(world, a, sc, t)
        for a in AGENTS
        for sc in [None, *world.sessions]
        for t in world.sessions
    }
    assert outcomes == {True, False}
