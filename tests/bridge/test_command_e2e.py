"""The command runner end to end: real gateway, real bridge, the fake agent CLI."""

from __future__ import annotations

import pytest

from tests.bridge.harness import Agent, Human, alive

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_approved_command_runs_and_the_answer_comes_back_as_a_relay(
    human: Human, agent: Agent
) -> None:
    agent.bridge()
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash"
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["relay"] is True
    assert reply["session_id"] == sent["session_id"]
    assert f"DONE mail={sent['id']}" in reply["body"]
    assert "ran [echo hi > marker.txt]" in reply["body"]
    start = agent.starts(sent["id"])[0]
    assert start["headline"].startswith("NEW TASK from a human (ana")
    assert start["cwd"] == str(agent.workspace) and start["pwd"] == str(agent.workspace)
    assert start["mode"] == "workspace"
