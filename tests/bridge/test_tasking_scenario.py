"""The attack probe of issue 22 as it happened, against a real `agentmail serve`
and a real `agentmail bridge --runner command` (docs/access.md, "Who may set an
agent to work"): olga, no tasker of bot, mailed it in /etc in full mode and the
bridge ran her command. Now the gateway refuses her before anything is written,
a tasker works only within the roots and her ceiling, the owner in full mode,
and the bridge's own roots hold even where the gateway's let a mail through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.testing import GatewayProcess
from tests.bridge.harness import Agent, Human
from tests.conftest import USER_PASSWORD

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def person(human: Human, name: str) -> Human:
    """A user of the module's gateway (made once), logged in."""
    admin = {"Authorization": f"Bearer {human.admin_token}"}
    made = await human.http.post(
        "/api/v1/admin/users", json={"username": name, "password": USER_PASSWORD}, headers=admin
    )
    assert made.status_code in (201, 409), made.text
    r = await human.http.post(
        "/api/v1/auth/login", json={"username": name, "password": USER_PASSWORD}
    )
    return Human(human.http, r.json()["token"], human.admin_token, name)


async def mail(who: Human, to: str, body: str, mode: str | None) -> httpx.Response:
    payload: dict[str, Any] = {"to": [to], "subject": "task", "body": body}
    if mode is not None:
        payload["permission_mode"] = mode
    return await who.http.post("/api/v1/mail", json=payload, headers=who.auth)


async def test_the_probe_olga_dora_ana_and_the_bridges_own_roots(
    human: Human, gateway: GatewayProcess, tmp_path: Path
) -> None:
    ana, dora, olga = human, await person(human, "dora"), await person(human, "olga")
    srv, home_x = tmp_path / "srv", tmp_path / "home" / "x"
    shop = srv / "shop"
    shop.mkdir(parents=True)
    home_x.mkdir(parents=True)
    admin = {"Authorization": f"Bearer {human.admin_token}"}
    # bot: ana owns it, dora may task it; the gateway lets it work in srv/* and
    # home/* (wider than its bridge will).
    r = await human.http.post(
        "/api/v1/admin/agents",
        json={
            "name": "bot",
            "owners": ["ana"],
            "taskers": ["dora"],
            "workspaces": [f"{srv}/*", f"{tmp_path}/home/*"],
        },
        headers=admin,
    )
    assert r.status_code == 201, r.text
    bot = Agent(
        "bot", r.json()["key"], shop, tmp_path / "state", tmp_path / "agent.log",
        tmp_path / "fake-state", gateway.url,
    )  # fmt: skip
    try:
        bot.bridge("--workspace-root", f"{srv}/*")
        await _scenario(ana, dora, olga, bot, shop, home_x)
    finally:
        for n, bridge in enumerate(bot.bridges):
            bridge.kill()
            (tmp_path / f"bridge-{n}.log").write_text(bridge.log)


async def _scenario(
    ana: Human, dora: Human, olga: Human, bot: Agent, shop: Path, home_x: Path
) -> None:
    evil = "!bash rm -rf important"
    # olga, no tasker: refused, whatever the workspace or mode; no mail, no turn.
    for where, mode in ((shop, "full"), ("/etc", "full"), (shop, None)):
        r = await mail(olga, f"bot@{where}.new", evil, mode)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "not_a_tasker"
    # dora, a tasker: a workspace session in srv/shop works (and asks for the command).
    r = await mail(dora, f"bot@{shop}.new", "!bash echo dora > dora.txt", "workspace")
    assert r.status_code == 201, r.text
    sent = r.json()
    request = await dora.wait_pending(sent["session_id"])
    await dora.decide(request["id"], "approve")
    reply = await dora.wait_reply(sent["session_id"], sent["id"])
    assert "ran [echo dora > dora.txt]" in reply["body"]
    assert (shop / "dora.txt").read_text() == "dora\n"
    # ... but not full, and not /etc.
    r = await mail(dora, f"bot@{shop}.new", evil, "full")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "mode_not_allowed")
    r = await mail(dora, "bot@/etc.new", evil, "workspace")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "workspace_not_allowed")
    # ana, the owner: full in srv/shop runs without asking.
    full = await ana.send(f"bot@{shop}.new", "!bash echo ana > ana.txt", mode="full")
    reply = await ana.wait_reply(full["session_id"], full["id"])
    assert "ran [echo ana > ana.txt]" in reply["body"]
    assert (shop / "ana.txt").read_text() == "ana\n"
    # The gateway allows home/x; the bridge's own roots (srv/*) refuse the turn.
    outside = await ana.send(f"bot@{home_x}.new", "!bash echo ran > ran.txt", mode="full")
    reply = await ana.wait_reply(outside["session_id"], outside["id"])
    assert reply["type"] == "failure", reply
    assert f"workspace {home_x} is outside this bridge's workspace roots" in reply["body"]
    assert bot.starts(outside["id"]) == []
    assert not (home_x / "ran.txt").exists()
    # No turn ever started for anything olga or dora were refused.
    started = {s.get("mail_id") for s in bot.starts()}
    assert started == {sent["id"], full["id"]}, started
