"""The ACP runner driving the real ``opencode acp`` (pinned in agent-clis.txt) over
the Agent Client Protocol, through a real bridge and gateway, with the scripted
Chat Completions server. opencode's config asks before bash and edits (what an
ACP agent asks about is its own configuration)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.agent_clis import require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.bridge.test_opencode_e2e import TURN_S, opencode_home, xdg_env
from tests.fakes.openai_chat import ChatServer, answer, fail_with, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(420)]

MARKER = "echo hi > marker.txt"


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    return require("opencode-ai")


@pytest.fixture
def model() -> Iterator[ChatServer]:
    with ChatServer(shell_then_answer(MARKER, "DONE")) as server:
        yield server


def start(agent: Agent, opencode_bin: Path, model: ChatServer) -> BridgeProcess:
    home = opencode_home(agent.workspace.parent, model,
                         permission={"bash": "ask", "edit": "ask"})  # fmt: skip
    return agent.bridge("--", str(opencode_bin), "acp", runner="acp", env=xdg_env(home))


async def test_approve_runs_the_command_the_answer_comes_back_and_the_next_mail_resumes(
    human: Human, agent: Agent, opencode_bin: Path, model: ChatServer
) -> None:
    start(agent, opencode_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"], TURN_S)
    assert request["tool_input"]["command"] == MARKER
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["body"].startswith("DONE"), reply["body"]
    sessions = json.loads((agent.state_dir / "sessions.json").read_text())
    platform_id = sessions[sent["session_id"]]
    model.script = answer("noted")
    before = len(model.chat_requests())
    second = await human.send(f"{agent.name}@{agent.workspace}", "and again, please",
                              parent=sent["id"])  # fmt: skip
    reply = await human.wait_reply(second["session_id"], second["id"], TURN_S)
    assert reply["body"] == "noted"  # the history replayed by session/load is not the answer
    later = json.dumps([r["body"] for r in model.chat_requests()[before:]])
    assert "create the marker" in later and "and again, please" in later
    assert json.loads((agent.state_dir / "sessions.json").read_text()) == {
        sent["session_id"]: platform_id
    }


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, opencode_bin: Path, model: ChatServer
) -> None:
    start(agent, opencode_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"], TURN_S)
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert not (agent.workspace / "marker.txt").exists()
    assert "use the staging database" in model.told()
    assert reply["type"] == "relay"


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, opencode_bin: Path, model: ChatServer
) -> None:
    start(agent, opencode_bin, model)
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


async def test_a_bad_key_mails_the_human_what_to_do(
    human: Human, agent: Agent, opencode_bin: Path, model: ChatServer
) -> None:
    model.script = fail_with(401, "invalid_api_key", "Incorrect API key provided")
    start(agent, opencode_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert reply["type"] == "failure" and "not logged in" in reply["body"], reply["body"]


async def test_a_deny_rule_refuses_in_full_mode_and_the_model_is_told_its_id(
    human: Human, agent: Agent, opencode_bin: Path, model: ChatServer
) -> None:
    """docs/rules.md: a deny rule wins over full mode, through the bridge's gate."""
    start(agent, opencode_bin, model)
    work = agent.workspace / "ruled"
    work.mkdir()
    admin = {"Authorization": f"Bearer {human.admin_token}"}  # admins own every workspace
    rule = {"effect": "deny", "tool_name": "execute", "scope": "workspace",
            "workspace": str(work), "reason": "no markers in this folder"}  # fmt: skip
    r = await human.http.post("/api/v1/rules", json=rule, headers=admin)
    assert r.status_code == 201, r.text
    rule_id = r.json()["id"]
    sent = await human.send(f"{agent.name}@{work}.new", "create the marker", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert reply["type"] == "relay"
    assert not (work / "marker.txt").exists()
    told = model.told()
    assert f"denied by rule {rule_id}: no markers in this folder" in told, told
    [request] = await human.all_permissions(sent["session_id"])
    assert request["decided_by"] == f"rule:{rule_id}"
