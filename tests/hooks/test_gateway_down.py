"""A gateway that cannot be reached: deny when mail-driven, the platform's own
prompt in an interactive terminal session (docs/behaviour.md#rules-on-the-waiting-side)."""

from __future__ import annotations

import uuid

import anyio
import httpx
import pytest

from tests.hooks.conftest import World
from tests.hooks.harness import Human, claude_input, spawn
from tests.hooks.test_claude_code import verdict

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_unreachable_gateway_denies_mail_driven_and_asks_interactive(
    own_world: World,
) -> None:
    async with httpx.AsyncClient(base_url=own_world.url, timeout=30) as http:
        session = await Human(http, own_world.tokens).new_session()
    # Negative control first: with the gateway up the mail-driven call is asked
    # of a human (here: it times out waiting, which is not "unavailable").
    up = await own_world.hook(
        "claude-code", claude_input(), AGENTMAIL_SESSION_ID=session, AGENTMAIL_HOOK_TIMEOUT="1"
    )
    assert verdict(up)[0] == "deny" and "timed out" in verdict(up)[1]

    own_world.gateway.stop()
    mail_driven = await own_world.hook("claude-code", claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(mail_driven)
    assert decision == "deny" and "unavailable" in reason and "mail-driven" in reason

    interactive = await own_world.hook("claude-code", claude_input(), AGENTMAIL_OWNER="ana")
    decision, reason = verdict(interactive)
    assert decision == "ask" and "unavailable" in reason

    # ZCode has no "ask" of its own: empty output lets its prompt decide.
    zcode = await own_world.hook(
        "zcode",
        {"tool_name": "Bash", "tool_input": {"command": "ls"}, "session_id": "z1"},
        AGENTMAIL_OWNER="ana",
    )
    assert zcode.returncode == 0 and zcode.stdout == ""


async def test_a_gateway_lost_while_waiting_ends_as_timed_out_and_unavailable(
    own_world: World,
) -> None:
    terminal = str(uuid.uuid4())
    async with (
        httpx.AsyncClient(base_url=own_world.url, timeout=30) as http,
        anyio.create_task_group() as tasks,
    ):
        human = Human(http, own_world.tokens)
        session = await human.new_session()
        wait = {"AGENTMAIL_HOOK_TIMEOUT": "3"}
        mail_driven = spawn(
            tasks, "claude-code", claude_input(),
            own_world.env(AGENTMAIL_SESSION_ID=session, **wait), own_world.workdir,
        )  # fmt: skip
        interactive = spawn(
            tasks, "claude-code", claude_input(session_id=terminal),
            own_world.env(AGENTMAIL_OWNER="ana", **wait), own_world.workdir,
        )  # fmt: skip
        await human.wait_pending(session)
        bound = await human.wait_bound_session(f"claude-code:{terminal}")
        await human.wait_pending(bound["id"])
        own_world.gateway.stop()  # both hooks are waiting on their event streams now
        decision, reason = verdict(await mail_driven.result())
        assert decision == "deny" and "timed out" in reason and "unavailable" in reason
        decision, reason = verdict(await interactive.result())
        assert decision == "ask" and "timed out" in reason and "unavailable" in reason
