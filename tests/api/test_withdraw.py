"""The agent's terminal answered first: `POST /api/v1/agent/permissions/withdraw`
(docs/remote.md, "Answered in the terminal")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_permissions import ask, decide
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def session(api: Api) -> dict[str, Any]:
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login")
    return dict(r.json())


PREFIX = "race:0123456789abcdef:"


async def withdraw(api: Api, who: str | None, prefix: str = PREFIX) -> Any:
    headers = api.auth(who) if who is not None else {}
    return await api.http.post(
        "/api/v1/agent/permissions/withdraw", json={"relay_key_prefix": prefix}, headers=headers
    )


async def status(api: Api, request_id: str) -> dict[str, Any]:
    r = await api.http.get(f"/api/v1/agent/permissions/{request_id}", headers=api.auth("claude"))
    return dict(r.json())


async def test_the_agent_withdraws_its_pending_request_as_answered_in_the_terminal(
    api: Api, session: dict[str, Any]
) -> None:
    mine = (await ask(api, session, key=f"{PREFIX}a1")).json()
    other = (await ask(api, session, key="race:ffff0000ffff0000:b1")).json()
    r = await withdraw(api, "claude")
    assert r.status_code == 200, r.text
    assert r.json() == {"withdrawn": [mine["id"]]}
    closed = await status(api, mine["id"])
    assert closed["status"] == "cancelled" and closed["decided_via"] == {"channel": "terminal"}
    assert (await status(api, other["id"]))["status"] == "pending"  # another call's prefix
    late = await decide(api, "ana", mine["id"], decision="approve")
    assert late.status_code == 409
    assert "answered in the terminal" in late.json()["error"]["message"]
    # Again: nothing left to withdraw.
    assert (await withdraw(api, "claude")).json() == {"withdrawn": []}


async def test_a_human_decision_that_came_first_stands(api: Api, session: dict[str, Any]) -> None:
    asked = (await ask(api, session, key=f"{PREFIX}a2")).json()
    assert (await decide(api, "ana", asked["id"], decision="deny")).status_code == 200
    assert (await withdraw(api, "claude")).json() == {"withdrawn": []}
    assert (await status(api, asked["id"]))["status"] == "denied"


async def test_only_the_asking_agent_withdraws(api: Api, session: dict[str, Any]) -> None:
    asked = (await ask(api, session, key=f"{PREFIX}a3")).json()
    assert (await withdraw(api, None)).status_code == 401
    assert (await withdraw(api, "ana")).status_code in (401, 403)  # a human is no agent
    assert (await withdraw(api, "codex")).json() == {"withdrawn": []}  # another agent
    assert (await status(api, asked["id"]))["status"] == "pending"


async def test_a_prefix_is_literal_and_bounded(api: Api, session: dict[str, Any]) -> None:
    asked = (await ask(api, session, key=f"{PREFIX}a4")).json()
    # LIKE wildcards in the prefix match only themselves.
    assert (await withdraw(api, "claude", "race:%%%%")).json() == {"withdrawn": []}
    assert (await withdraw(api, "claude", "race:0123456789abcde_:")).json() == {"withdrawn": []}
    assert (await status(api, asked["id"]))["status"] == "pending"
    for bad in ("short", "x" * 161):
        r = await withdraw(api, "claude", bad)
        assert r.status_code == 400 and r.json()["error"]["field"] == "relay_key_prefix", r.text
