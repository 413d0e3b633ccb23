"""Hop limits stop relay loops; budgets bound an agent between human mails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mailui4agents.settings import Settings
from tests.conftest import Api, fast_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return fast_settings(tmp_path, send_budget=4)


@pytest.fixture
async def loop(api: Api) -> dict[str, Any]:
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    r = await api.send("ana", ["claude@/srv/shop.new", "codex@/srv/shop.new"], subject="pair")
    return dict(r.json())


async def relay(api: Api, sender: str, to: str, m: dict[str, Any], key: str) -> Any:
    return await api.send(
        sender, [f"{to}@/srv/shop.{m['session_alias']}"], subject="re", relay=True, relay_key=key
    )


async def test_two_agents_relaying_stop_at_the_hop_limit(api: Api, loop: dict[str, Any]) -> None:
    statuses = []
    for i in range(7):
        sender, to = ("claude", "codex") if i % 2 == 0 else ("codex", "claude")
        statuses.append((await relay(api, sender, to, loop, f"k{i}")).status_code)
    assert statuses[:5] == [201] * 5  # default hop limit 5
    r = await relay(api, "claude", "codex", loop, "k-over")
    assert r.status_code == 409 and r.json()["error"]["code"] == "hop_limit"


async def test_a_human_mail_in_between_resets_the_hop_count(api: Api, loop: dict[str, Any]) -> None:
    for i in range(5):
        sender, to = ("claude", "codex") if i % 2 == 0 else ("codex", "claude")
        assert (await relay(api, sender, to, loop, f"a{i}")).status_code == 201
    assert (await relay(api, "claude", "codex", loop, "refused")).status_code == 409
    human = await api.send("ana", [f"claude@/srv/shop.{loop['session_alias']}"], subject="go on")
    assert human.status_code == 201
    # The refused key was never used: the same relay can now go through.
    assert (await relay(api, "claude", "codex", loop, "refused")).status_code == 201


async def test_budget_counts_agent_sends_and_frees_relays_to_humans(
    api: Api, loop: dict[str, Any]
) -> None:
    to_ana = f"ana@/srv/shop.{loop['session_alias']}"
    for i in range(4):  # relays to a human are free (4 < the hop limit)
        r = await api.send("claude", [to_ana], subject="answer", relay=True, relay_key=f"h{i}")
        assert r.status_code == 201
    to_codex = f"codex@/srv/shop.{loop['session_alias']}"
    for _ in range(4):
        assert (await api.send("claude", [to_codex], subject="msg")).status_code == 201
    r = await api.send("claude", [to_codex], subject="one too many", relay_key="b-over")
    assert r.status_code == 409 and r.json()["error"]["code"] == "budget_exhausted"
    # Another agent's budget is its own.
    assert (
        await api.send("codex", [to_codex.replace("codex@", "claude@")], subject="x")
    ).status_code == 201
    # A human's mail opens a new budget, and the refused relay key is free again.
    await api.send("ana", [f"claude@/srv/shop.{loop['session_alias']}"], subject="more please")
    r = await api.send("claude", [to_codex], subject="again", relay_key="b-over")
    assert r.status_code == 201
