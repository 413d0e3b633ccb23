"""`agentmail hook generic` end to end: {"decision","reason"} and exit 0 / 2."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.hooks.conftest import World
from tests.hooks.harness import Human, spawn

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CALL = {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "c-1"}


async def test_an_approval_allows_with_exit_0(world: World, human: Human) -> None:
    session = await human.new_session()
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, "generic", CALL, world.env(AGENTMAIL_SESSION_ID=session), world.workdir)
        [request] = await human.wait_pending(session)
        assert request["tool_name"] == "Bash"
        await human.decide(request["id"], "approve", note="only build/")
        run = await hook.result()
    assert run.returncode == 0
    assert json.loads(run.stdout) == {
        "decision": "allow",
        "reason": "approved by ana through the API: only build/",
    }


async def test_a_denial_denies_with_exit_2_and_carries_the_note(world: World, human: Human) -> None:
    session = await human.new_session()
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, "generic", CALL, world.env(AGENTMAIL_SESSION_ID=session), world.workdir)
        [request] = await human.wait_pending(session)
        await human.decide(request["id"], "deny", note="use the staging database")
        run = await hook.result()
    assert run.returncode == 2
    assert json.loads(run.stdout) == {
        "decision": "deny",
        "reason": "denied by ana through the API: use the staging database",
    }


async def test_modes_full_allows_and_plan_denies_without_asking(world: World, human: Human) -> None:
    full = await human.new_session("full")
    run = await world.hook("generic", CALL, AGENTMAIL_SESSION_ID=full)
    assert run.returncode == 0 and json.loads(run.stdout)["decision"] == "allow"
    plan = await human.new_session("plan")
    run = await world.hook("generic", CALL, AGENTMAIL_SESSION_ID=plan)
    assert run.returncode == 2 and json.loads(run.stdout)["decision"] == "deny"
    assert await human.permissions(plan) == [] and await human.permissions(full) == []


async def test_bad_input_and_no_session_deny_with_exit_2(world: World) -> None:
    for payload in ("not json", json.dumps({"tool_input": {}}), json.dumps([1])):
        run = await world.hook("generic", payload)
        assert run.returncode == 2 and json.loads(run.stdout)["decision"] == "deny"
    run = await world.hook("generic", CALL)  # no AGENTMAIL_SESSION_ID: no local prompt either
    assert run.returncode == 2
    out = json.loads(run.stdout)
    assert out["decision"] == "deny" and "no local prompt" in out["reason"]


async def test_a_read_tool_is_allowed_without_the_gateway(world: World) -> None:
    run = await world.hook(
        "generic", {"tool_name": "Read", "tool_input": {"file_path": "a.py"}},
        AGENTMAIL_URL="http://127.0.0.1:9",
    )  # fmt: skip
    assert run.returncode == 0 and json.loads(run.stdout)["decision"] == "allow"
