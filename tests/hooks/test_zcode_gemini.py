"""`agentmail hook zcode` and `agentmail hook gemini` end to end: each prints
exactly what its platform accepts."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.hooks.conftest import World
from tests.hooks.harness import HookRun, Human, gemini_input, spawn, zcode_input

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def decided(
    world: World, human: Human, platform: str, payload: dict[str, Any], decision: str, **extra: Any
) -> HookRun:
    session = await human.new_session()
    async with anyio.create_task_group() as tasks:
        hook = spawn(
            tasks, platform, payload, world.env(AGENTMAIL_SESSION_ID=session), world.workdir
        )
        [request] = await human.wait_pending(session)
        await human.decide(request["id"], decision, **extra)
        run = await hook.result()
    return run


# -- ZCode: exactly {"decision":"approve"} or {"decision":"block","reason":...} --------


async def test_zcode_approval_prints_exactly_approve(world: World, human: Human) -> None:
    run = await decided(world, human, "zcode", zcode_input(session_id="z-1"), "approve")
    assert run.returncode == 0
    assert run.stdout.strip() == '{"decision":"approve"}'


async def test_zcode_denial_prints_block_with_the_note_and_no_other_key(
    world: World, human: Human
) -> None:
    run = await decided(world, human, "zcode", zcode_input(), "deny", note="wrong repo")
    assert run.returncode == 0
    out = json.loads(run.stdout)
    assert set(out) == {"decision", "reason"}
    assert out == {"decision": "block", "reason": "denied by ana through the API: wrong repo"}


async def test_zcode_full_mode_approves_explicitly(world: World, human: Human) -> None:
    session = await human.new_session("full")
    run = await world.hook("zcode", zcode_input(), AGENTMAIL_SESSION_ID=session)
    assert run.stdout.strip() == '{"decision":"approve"}'


async def test_zcode_plan_mode_blocks_and_no_session_prints_nothing(
    world: World, human: Human
) -> None:
    session = await human.new_session("plan")
    run = await world.hook("zcode", zcode_input(), AGENTMAIL_SESSION_ID=session)
    out = json.loads(run.stdout)
    assert set(out) == {"decision", "reason"} and out["decision"] == "block"
    # No mail session and no owner: no opinion, ZCode's own prompt decides.
    silent = await world.hook("zcode", zcode_input())
    assert silent.returncode == 0 and silent.stdout == ""


async def test_zcode_session_id_from_its_environment_binds_the_interactive_session(
    world: World, human: Human
) -> None:
    payload = zcode_input()  # no session_id on stdin: ZCode gives it in ZCODE_SESSION_ID
    env = world.env(AGENTMAIL_OWNER="ana", ZCODE_SESSION_ID="zs-42")
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, "zcode", payload, env, world.workdir)
        session = await human.wait_bound_session("zcode:zs-42")
        [request] = await human.wait_pending(session["id"])
        await human.decide(request["id"], "approve")
        assert (await hook.result()).stdout.strip() == '{"decision":"approve"}'


# -- Gemini CLI: {"decision":"allow"} / {"decision":"deny","reason":...} -------------


def gemini_out(run: HookRun) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert set(out) == {"decision", "reason"}
    return dict(out)


async def test_gemini_approval_allows(world: World, human: Human) -> None:
    run = await decided(world, human, "gemini", gemini_input(), "approve")
    assert gemini_out(run)["decision"] == "allow"


async def test_gemini_denial_denies_with_the_note(world: World, human: Human) -> None:
    run = await decided(world, human, "gemini", gemini_input(), "deny", note="use staging")
    assert gemini_out(run) == {
        "decision": "deny",
        "reason": "denied by ana through the API: use staging",
    }


async def test_gemini_full_mode_allows_explicitly(world: World, human: Human) -> None:
    session = await human.new_session("full")
    run = await world.hook("gemini", gemini_input(), AGENTMAIL_SESSION_ID=session)
    assert gemini_out(run)["decision"] == "allow"


async def test_gemini_read_tool_allowed_and_ask_becomes_deny(world: World, human: Human) -> None:
    session = await human.new_session("plan")
    read = gemini_input("read_file", {"file_path": "/srv/shop/app.py"})
    run = await world.hook("gemini", read, AGENTMAIL_SESSION_ID=session)
    assert gemini_out(run)["decision"] == "allow"
    # No mail session and no owner: Gemini cannot safely defer to its own prompt.
    shell = await world.hook("gemini", gemini_input())
    out = gemini_out(shell)
    assert out["decision"] == "deny" and "Gemini CLI" in out["reason"]
