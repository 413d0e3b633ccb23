"""The ZCode runner against a fake ``zcode`` that follows ZCode's documented
contract (tests/fakes/fake_zcode.py): no ZCode binary is obtainable here, so this
proves the runner and ``agentmail hook zcode`` against the contract only."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.harness import REPO, Agent, BridgeProcess, Human
from tests.fakes.openai_chat import ChatServer, answer, fail_with, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

MARKER = "echo hi > marker.txt"
FAKE_ZCODE = REPO / "tests" / "fakes" / "fake_zcode.py"


@pytest.fixture
def model() -> Iterator[ChatServer]:
    with ChatServer(shell_then_answer(MARKER, "DONE")) as server:
        yield server


def install_hook(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "zcode"],
        env={"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
             "PYTHONPATH": str(REPO / "src")},
        capture_output=True, text=True, check=True,
    )  # fmt: skip


def start(agent: Agent, model: ChatServer, *, hook: bool = True) -> BridgeProcess:
    home = agent.workspace.parent / "home"
    home.mkdir(exist_ok=True)
    if hook:
        install_hook(home)
    return agent.bridge(
        "--runner-arg", f"bin={FAKE_ZCODE}", "--runner-arg", f"home={home}", runner="zcode",
        HOME=str(home), FAKE_ZCODE_MODEL_URL=model.url,
    )  # fmt: skip


async def test_approve_runs_the_command_the_answer_comes_back_and_the_next_mail_resumes(
    human: Human, agent: Agent, model: ChatServer
) -> None:
    start(agent, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash" and request["tool_input"]["command"] == MARKER
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["body"].startswith("DONE")
    sessions = json.loads((agent.state_dir / "sessions.json").read_text())
    platform_id = sessions[sent["session_id"]]
    assert platform_id.startswith("sess_")
    model.script = answer("noted")
    second = await human.send(f"{agent.name}@{agent.workspace}", "and again",
                              parent=sent["id"])  # fmt: skip
    await human.wait_reply(second["session_id"], second["id"])
    last = model.chat_requests()[-1]["body"]["messages"]
    assert "create the marker" in json.dumps(last) and "and again" in last[-1]["content"]
    assert json.loads((agent.state_dir / "sessions.json").read_text()) == sessions
    assert zcode_modes(agent, sent["session_id"]) == ["edit", "edit"]


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, model: ChatServer
) -> None:
    start(agent, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert any("use the staging database" in r for r in model.tool_results())
    assert reply["type"] == "relay"


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, model: ChatServer
) -> None:
    start(agent, model)
    plan = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="plan")  # fmt: skip
    await human.wait_reply(plan["session_id"], plan["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(plan["session_id"]) == []
    assert zcode_modes(agent, plan["session_id"]) == ["plan"]  # ZCode's own read-only mode
    full = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="full")  # fmt: skip
    await human.wait_reply(full["session_id"], full["id"])
    assert (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(full["session_id"]) == []
    assert zcode_modes(agent, full["session_id"]) == ["yolo"]


def zcode_modes(agent: Agent, mail_session: str) -> list[str]:
    """The --mode of each turn of the fake's session bound to ``mail_session``."""
    platform_id = json.loads((agent.state_dir / "sessions.json").read_text())[mail_session]
    path = agent.workspace.parent / "home" / ".zcode" / "cli" / "sessions" / f"{platform_id}.json"
    return list(json.loads(path.read_text())["modes"])


async def test_a_bad_key_mails_the_human_what_to_do(
    human: Human, agent: Agent, model: ChatServer
) -> None:
    model.script = fail_with(401, "invalid_api_key", "Incorrect API key provided")
    start(agent, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure" and "not logged in" in reply["body"], reply["body"]


async def test_without_the_hook_installed_no_turn_runs(
    human: Human, agent: Agent, model: ChatServer
) -> None:
    """Fail closed: ZCode takes its hooks from its config only, so without ours the
    runner refuses the turn (and says what to run) instead of running ungated."""
    start(agent, model, hook=False)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure" and "agentmail install-hook zcode" in reply["body"]
    assert model.chat_requests() == [] and not (agent.workspace / "marker.txt").exists()
