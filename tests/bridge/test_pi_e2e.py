"""The real pi CLI (pinned in agent-clis.txt) driven by a real bridge against a
real gateway, with the scripted Chat Completions server on 127.0.0.1. Approvals
go through the extension the package ships (loaded with -e)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.agent_clis import require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.openai_chat import ChatServer, answer, fail_with, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

MARKER = "echo hi > marker.txt"


@pytest.fixture(scope="module")
def pi_bin() -> Path:
    return require("@mariozechner/pi-coding-agent")


@pytest.fixture
def model() -> Iterator[ChatServer]:
    with ChatServer(shell_then_answer(MARKER, "DONE")) as server:
        yield server


def pi_home(agent: Agent, model: ChatServer) -> Path:
    home = agent.workspace.parent / "home"
    (home / ".pi" / "agent").mkdir(parents=True, exist_ok=True)
    provider = {"baseUrl": model.url, "api": "openai-completions", "apiKey": "dummy",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": "fake-model", "name": "Fake", "reasoning": False}]}  # fmt: skip
    (home / ".pi" / "agent" / "models.json").write_text(
        json.dumps({"providers": {"fake": provider}})
    )
    return home


def start(agent: Agent, pi_bin: Path, model: ChatServer) -> BridgeProcess:
    home = pi_home(agent, model)
    return agent.bridge(
        "--runner-arg", f"bin={pi_bin}", "--runner-arg", "model=fake/fake-model",
        "--runner-arg", f"home={home}", runner="pi", HOME=str(home), PI_OFFLINE="1",
    )  # fmt: skip


def offered(model: ChatServer) -> set[str]:
    return {
        t["function"]["name"] for r in model.chat_requests() for t in r["body"].get("tools") or []
    }


async def test_approve_runs_the_command_and_the_answer_comes_back(
    human: Human, agent: Agent, pi_bin: Path, model: ChatServer
) -> None:
    start(agent, pi_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "bash" and request["tool_input"]["command"] == MARKER
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["body"].startswith("DONE")
    assert "NEW TASK from a human (ana@" in model.told()


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, pi_bin: Path, model: ChatServer
) -> None:
    start(agent, pi_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert any("use the staging database" in r for r in model.tool_results())
    assert reply["type"] == "relay" and "use the staging database" in reply["body"]


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, pi_bin: Path, model: ChatServer
) -> None:
    start(agent, pi_bin, model)
    plan = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="plan")  # fmt: skip
    await human.wait_reply(plan["session_id"], plan["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(plan["session_id"]) == []
    assert offered(model) == {"read", "grep", "find", "ls"}  # pi offered no tool that writes
    full = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="full")  # fmt: skip
    await human.wait_reply(full["session_id"], full["id"])
    assert (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(full["session_id"]) == []


async def test_a_second_mail_resumes_the_same_pi_session(
    human: Human, agent: Agent, pi_bin: Path, model: ChatServer
) -> None:
    model.script = answer("noted")
    start(agent, pi_bin, model)
    first = await human.send(f"{agent.name}@{agent.workspace}.new", "remember the word PAPAYA",
                             mode="full")  # fmt: skip
    await human.wait_reply(first["session_id"], first["id"])
    sessions = json.loads((agent.state_dir / "sessions.json").read_text())
    pi_session = sessions[first["session_id"]]
    before = len(model.chat_requests())
    second = await human.send(f"{agent.name}@{agent.workspace}", "which word?",
                              parent=first["id"])  # fmt: skip
    await human.wait_reply(second["session_id"], second["id"])
    later = json.dumps([r["body"] for r in model.chat_requests()[before:]])
    assert "remember the word PAPAYA" in later and "which word?" in later
    assert json.loads((agent.state_dir / "sessions.json").read_text()) == sessions
    files = list((agent.workspace.parent / "home" / ".pi" / "agent" / "sessions").glob(
        f"*/*_{pi_session}.jsonl"))  # fmt: skip
    assert len(files) == 1 and "which word?" in files[0].read_text()
    # The heartbeat's platform sessions come from those files (for adoption).
    from mailui4agents.bridge.runners.pi import PiRunner

    home = agent.workspace.parent / "home"
    [reported] = PiRunner({"home": str(home)}).recent_sessions([str(agent.workspace)])
    assert reported["platform_id"] == pi_session and reported["cwd"] == str(agent.workspace)
    assert "NEW TASK" in reported["title"]


async def test_a_bad_key_mails_the_human_what_to_do(
    human: Human, agent: Agent, pi_bin: Path, model: ChatServer
) -> None:
    model.script = fail_with(401, "invalid_api_key", "Incorrect API key provided")
    start(agent, pi_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure" and "not logged in" in reply["body"]
    assert "401" in reply["body"]


def run_pi(pi_bin: Path, home: Path, work: Path, *args: str, **env: str) -> str:
    """One headless pi turn outside the bridge; its JSON lines."""
    import subprocess

    done = subprocess.run(
        [str(pi_bin), "-p", "--mode", "json", "--model", "fake/fake-model", *args],
        input=b"create the marker", cwd=work, capture_output=True, timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PI_OFFLINE": "1", "PWD": str(work),
             **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_the_gate_blocks_when_its_hook_cannot_start_or_answers_garbage(
    pi_bin: Path, model: ChatServer, tmp_path: Path
) -> None:
    from mailui4agents.bridge.runners.pi import extension_path

    (tmp_path / "work").mkdir()
    home = pi_home(Agent("x", "", tmp_path / "work", tmp_path, tmp_path, tmp_path, ""), model)
    gate = ["--no-extensions", "-e", str(extension_path())]
    for hook, said in ((["/nonexistent/agentmail"], "cannot start"),
                       (["/bin/echo", "allow"], "the hook failed")):  # fmt: skip
        out = run_pi(pi_bin, home, tmp_path / "work", *gate, AGENTMAIL_PI_HOOK=json.dumps(hook))
        assert not (tmp_path / "work" / "marker.txt").exists()
        assert said in model.tool_results()[-1] and '"isError":true' in out


def test_install_hook_pi_gates_a_person_s_own_pi(
    pi_bin: Path, model: ChatServer, tmp_path: Path
) -> None:
    """The installed extension is found by pi itself (no -e); with no mail session
    and no owner the hook says "ask", and headless pi has no prompt: blocked."""
    import subprocess
    import sys

    (tmp_path / "work").mkdir()
    home = pi_home(Agent("x", "", tmp_path / "work", tmp_path, tmp_path, tmp_path, ""), model)
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    subprocess.run([sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "pi"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    assert (home / ".pi" / "agent" / "extensions" / "agentmail.ts").is_file()
    run_pi(pi_bin, home, tmp_path / "work", PATH=env["PATH"])
    assert not (tmp_path / "work" / "marker.txt").exists()
    assert "the platform's own prompt decides" in model.tool_results()[-1]
