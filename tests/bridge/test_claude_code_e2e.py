"""The real Claude Code CLI (pinned in agent-clis.txt) driven by a real bridge
against a real gateway, with our scripted model server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.model_server import (
    ModelServer,
    answer,
    bash_then_answer,
    fail_with,
    hang,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

MARKER = "echo hi > marker.txt"


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(bash_then_answer(MARKER, "DONE")) as server:
        yield server


def start(agent: Agent, claude_bin: Path, model: ModelServer, *args: str) -> BridgeProcess:
    home = agent.workspace.parent / "home"
    home.mkdir(exist_ok=True)
    return agent.bridge(
        "--runner-arg", f"bin={claude_bin}", "--runner-arg", f"home={home}", *args,
        runner="claude-code",
        HOME=str(home),
        ANTHROPIC_BASE_URL=model.url,
        ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )  # fmt: skip


def tool_results(model: ModelServer) -> list[str]:
    found = []
    for request in model.messages_requests():
        for message in request["body"].get("messages") or []:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    found.append(json.dumps(block.get("content")))
    return found


async def test_approve_runs_the_command_and_the_answer_comes_back(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    start(agent, claude_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash" and request["tool_input"]["command"] == MARKER
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["session_id"] == sent["session_id"]
    assert reply["body"].startswith("DONE")
    told = model.told()
    assert "NEW TASK from a human (ana@" in told and "create the marker" in told
    # The agentmail MCP tools reached the model (--mcp-config for the turn).
    tools = {t["name"] for r in model.messages_requests() for t in r["body"].get("tools") or []}
    assert {"mcp__agentmail__send_mail", "mcp__agentmail__read_thread"} <= tools
    assert "--permission-mode" not in told  # the flag is ours, not the model's business


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    start(agent, claude_bin, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="workspace")  # fmt: skip
    request = await human.wait_pending(sent["session_id"])
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert any("use the staging database" in r for r in tool_results(model))
    assert reply["type"] == "relay"


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    start(agent, claude_bin, model)
    plan = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="plan")  # fmt: skip
    await human.wait_reply(plan["session_id"], plan["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(plan["session_id"]) == []
    full = await human.send(f"{agent.name}@{agent.workspace}.new", "create the marker",
                            mode="full")  # fmt: skip
    await human.wait_reply(full["session_id"], full["id"])
    assert (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(full["session_id"]) == []


async def test_a_second_mail_resumes_the_same_claude_session(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    model.script = answer("noted")
    start(agent, claude_bin, model)
    first = await human.send(f"{agent.name}@{agent.workspace}.new", "remember the word PAPAYA",
                             mode="full")  # fmt: skip
    await human.wait_reply(first["session_id"], first["id"])
    sessions = json.loads((agent.state_dir / "sessions.json").read_text())
    claude_session = sessions[first["session_id"]]
    before = len(model.messages_requests())
    second = await human.send(f"{agent.name}@{agent.workspace}", "which word?",
                              parent=first["id"])  # fmt: skip
    await human.wait_reply(second["session_id"], second["id"])
    later = json.dumps([r["body"] for r in model.messages_requests()[before:]])
    assert "remember the word PAPAYA" in later and "which word?" in later
    assert json.loads((agent.state_dir / "sessions.json").read_text()) == sessions
    transcript = next((agent.workspace.parent / "home" / ".claude" / "projects").glob(
        f"*/{claude_session}.jsonl"))  # fmt: skip
    assert "which word?" in transcript.read_text()


async def test_agent_mail_gets_no_auto_relay(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    model.script = answer("thanks, received")
    start(agent, claude_bin, model)
    other = await human.new_agent(agent.workspace.parent / "other", agent.url)
    from mailui4agents.client import AsyncClient, ClientConfig, MailOut

    # other works in a session ana started with it (docs/access.md).
    origin = await human.send(f"{other.name}@{other.workspace}.new", "coordinate")
    async with AsyncClient(ClientConfig(url=agent.url, key=other.key)) as client:
        sent = await client.send_mail(
            [f"{agent.name}@{agent.workspace}.new"],
            "fyi",
            "done",
            from_session_id=origin["session_id"],
        )
        assert isinstance(sent, MailOut), sent  # not a Duplicate
        await agent.wait_ledger(f'"mail_id":"{sent.id}","state":"completed","outcome":"no_relay"')
        thread = await client.thread(sent.id, session_id=sent.session_id)
    assert [m.type for m in thread.items] == ["message"]
    assert "thanks, received" not in json.dumps([m.body for m in thread.items])


async def test_bad_key_then_quota_each_mail_the_human_what_to_do(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    model.script = fail_with(401, "authentication_error", "invalid x-api-key")
    start(agent, claude_bin, model)
    first = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(first["session_id"], first["id"])
    assert reply["type"] == "failure" and "not logged in" in reply["body"]
    assert "What to do: Log the agent CLI in again" in reply["body"]
    model.script = fail_with(429, "rate_limit_error", "Your credit balance is too low")
    second = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(second["session_id"], second["id"])
    assert reply["type"] == "failure" and "credit or quota" in reply["body"]
    assert "Add credit or raise the quota" in reply["body"]


async def test_a_hanging_turn_times_out_and_the_next_mail_still_runs(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    model.script = hang()
    start(agent, claude_bin, model, "--turn-timeout", "8")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure" and "timed out" in reply["body"]
    model.script = answer("back again")
    after = await human.send(f"{agent.name}@{agent.workspace}", "and now?", parent=sent["id"])
    reply = await human.wait_reply(after["session_id"], after["id"])
    assert reply["type"] == "relay" and reply["body"] == "back again"


def test_install_mcp_for_a_project_makes_the_real_cli_connect_the_server(
    claude_bin: Path, tmp_path: Path
) -> None:
    """`claude mcp list` says "Pending approval" for a project .mcp.json alone and
    "Connected" once install-mcp has approved it in .claude/settings.local.json
    (in a git repository, Claude Code's project root: elsewhere it stays pending)."""
    import subprocess
    import sys

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # where `agentmail` lives
    env = {"PATH": path, "HOME": str(home), "DISABLE_TELEMETRY": "1"}
    install = [sys.executable, "-m", "mailui4agents.cli.main", "install-mcp", "claude-code",
               "--project", str(project)]  # fmt: skip
    subprocess.run(install, check=True, capture_output=True, env={**env, "PYTHONPATH": ""})

    def listed() -> str:
        done = subprocess.run([str(claude_bin), "mcp", "list"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=90)  # fmt: skip
        return done.stdout

    assert "Connected" in listed()
    (project / ".claude" / "settings.local.json").unlink()
    assert "Pending approval" in listed()  # the negative control


async def test_a_claude_session_from_the_terminal_is_reported_adopted_and_resumed(
    human: Human, agent: Agent, claude_bin: Path, model: ModelServer
) -> None:
    """A person's own `claude` session in the workspace shows up in the heartbeat;
    mail to agent@cwd.slug adopts it and the bridge resumes that very session."""
    import anyio

    model.script = answer("noted")
    home = agent.workspace.parent / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "ANTHROPIC_BASE_URL": model.url,
           "ANTHROPIC_API_KEY": "dummy", "DISABLE_TELEMETRY": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [str(claude_bin), "-p", "remember the word MANGO", "--output-format", "json"],
            cwd=agent.workspace, env=env,
        )  # fmt: skip
    platform_id = json.loads(done.stdout)["session_id"]
    start(agent, claude_bin, model)
    admin = {"Authorization": f"Bearer {human.admin_token}"}  # the agent's owner
    slug = "remember-the-word-mango"
    with anyio.fail_after(30):
        while True:  # the heartbeat is not an event a person can wait on: poll
            r = await human.http.get(
                "/api/v1/contacts/suggest", params={"q": f"{agent.name}@{agent.workspace}.rem"},
                headers=admin,
            )  # fmt: skip
            if any(s.get("alias") == slug for s in r.json().get("sessions", [])):
                break
            await anyio.sleep(0.1)
    before = len(model.messages_requests())
    r = await human.http.post(
        "/api/v1/mail",
        json={"to": [f"{agent.name}@{agent.workspace}.{slug}"], "subject": "again",
              "body": "which word was it?", "permission_mode": "full"},
        headers=admin,
    )  # fmt: skip
    assert r.status_code == 201, r.text
    sent = r.json()
    with anyio.fail_after(60):
        while True:
            r = await human.http.get("/api/v1/mailbox", params={"status": "all",
                                     "session_id": sent["session_id"]}, headers=admin)  # fmt: skip
            if any(m.get("parent_mail_id") == sent["id"] for m in r.json()["items"]):
                break
            await anyio.sleep(0.1)
    later = json.dumps([r["body"] for r in model.messages_requests()[before:]])
    assert "remember the word MANGO" in later and "which word was it?" in later
    sessions = json.loads((agent.state_dir / "sessions.json").read_text())
    assert sessions[sent["session_id"]] == platform_id
