"""The dsh runner driving the real DSH (``@deepseek-ai/dsh`` pinned in agent-clis.txt,
installed with its Node 22 by scripts/install-agent-clis.sh) over ACP, through a real
bridge and gateway, with the scripted Chat Completions server; the profile is the
one ``agentmail install-hook dsh`` writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.agent_clis import require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.openai_chat import ChatServer, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(420)]

MARKER = "echo hi > marker.txt"
TURN_S = 180.0


@pytest.fixture(scope="module")
def dsh_bin() -> Path:
    return require("@deepseek-ai/dsh").resolve()


@pytest.fixture
def model() -> Iterator[ChatServer]:
    with ChatServer(shell_then_answer(MARKER, "DONE")) as server:
        yield server


def start(agent: Agent, dsh_bin: Path, model: ChatServer) -> BridgeProcess:
    home = agent.workspace.parent / "dsh-home"
    modules = dsh_bin.parent.parent / "profile" / "node_modules"
    env = {**os.environ, "DSH_HOME": str(home)}
    subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "dsh",
         "--node-modules", str(modules)], check=True, env=env,
    )  # fmt: skip
    return agent.bridge(
        "--runner-arg", f"bin={dsh_bin}", "--runner-arg", f"home={home}", runner="dsh",
        DEEPSEEK_BASE_URL=model.url, DEEPSEEK_API_KEY="dummy", DSH_TELEMETRY_DISABLED="1",
    )  # fmt: skip


async def test_approve_runs_the_command_and_the_answer_comes_back(
    human: Human, agent: Agent, dsh_bin: Path, model: ChatServer
) -> None:
    start(agent, dsh_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"], TURN_S)
    assert not (agent.workspace / "marker.txt").exists()
    # DSH sends only the call's id: the request says so, with what the agent said.
    assert request["tool_input"]["details"] == "dsh gave no details of this tool call (only its id)"
    assert "agent_said_before_asking" in request["tool_input"], request
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["body"].startswith("DONE"), reply["body"]


async def test_deny_nothing_is_written_and_the_model_is_told(
    human: Human, agent: Agent, dsh_bin: Path, model: ChatServer
) -> None:
    start(agent, dsh_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"], TURN_S)
    await human.decide(request["id"], "deny")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert not (agent.workspace / "marker.txt").exists()
    assert "rejected" in " ".join(model.tool_results()), model.tool_results()
    assert reply["type"] == "relay"


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, dsh_bin: Path, model: ChatServer
) -> None:
    start(agent, dsh_bin, model)
    plan_work, full_work = agent.workspace / "plan", agent.workspace / "full"
    plan_work.mkdir()
    full_work.mkdir()
    plan = await human.send(f"{agent.name}@{plan_work}.new", "create the marker", mode="plan")
    full = await human.send(f"{agent.name}@{full_work}.new", "create the marker", mode="full")
    await human.wait_reply(plan["session_id"], plan["id"], TURN_S)
    await human.wait_reply(full["session_id"], full["id"], TURN_S)
    assert not (plan_work / "marker.txt").exists()
    assert (full_work / "marker.txt").read_text() == "hi\n"
    assert await human.all_permissions(plan["session_id"]) == []
    assert await human.all_permissions(full["session_id"]) == []


async def test_a_second_mail_is_a_new_dsh_session_told_the_thread_so_far(
    human: Human, agent: Agent, dsh_bin: Path, model: ChatServer
) -> None:
    """DSH cannot resume over ACP: the second turn's prompt carries the first mail
    and the agent's reply (bridge/prompt.py, the thread so far)."""
    start(agent, dsh_bin, model)
    first = await human.send(f"{agent.name}@{agent.workspace}.new", "remember the word PAPAYA",
                             mode="full")  # fmt: skip
    reply = await human.wait_reply(first["session_id"], first["id"], TURN_S)
    before = len(model.chat_requests())
    second = await human.send(f"{agent.name}@{agent.workspace}", "which word?",
                              parent=first["id"])  # fmt: skip
    await human.wait_reply(second["session_id"], second["id"], TURN_S)
    later = model.chat_requests()[before:]
    first_prompt = json.dumps(later[0]["body"])
    assert "which word?" in first_prompt
    assert "the thread so far" in first_prompt and "remember the word PAPAYA" in first_prompt
    assert reply["body"][:20] in first_prompt  # the agent's own earlier answer
    # A new DSH session: its first request has no earlier assistant turn.
    assert not any(m.get("role") == "assistant" for m in later[0]["body"]["messages"])
