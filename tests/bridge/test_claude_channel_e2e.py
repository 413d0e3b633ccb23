"""The real Claude Code CLI (2.1.197) in a real terminal (tmux) with
`agentmail install-mcp claude-code --channel` and
`claude --dangerously-load-development-channels server:agentmail`, against the
scripted model (docs/platforms.md, "Claude Code channels").

No hooks are installed: whatever reaches the model or closes the dialog here
came through the channel.

TEST-ONLY: Claude Code turns channels on only when its rollout flags
(`tengu_harbor`, and `tengu_harbor_permissions` for the permission relay) are
on for the account; Anthropic's servers set them, and Claude Code keeps their
last values in its config file (`cachedGrowthBookFeatures` in `~/.claude.json`).
The scripted model is not Anthropic's API, so these tests write the cached
values into the test's own temporary HOME — the CLI's own cache, read by the CLI
itself; nothing of Claude Code is patched. Without them (the last test) Claude
Code says "Channels are not currently available" and the server claims no mail.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.bridge.harness import Agent, Human
from tests.bridge.tmux import REPO, Terminal
from tests.fakes.model_server import ModelServer, Reply, bash_then_answer, last_user_content

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

MARKER = "echo hi > marker.txt"
DIALOG = "Do you want to proceed?"
DEV_WARNING = "--dangerously-load-development-channels is for local channel development only"
ROLLOUT = {"tengu_harbor": True, "tengu_harbor_permissions": True}


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(bash_then_answer(MARKER, "DONE")) as server:
        yield server


async def launch(
    agent: Agent,
    claude_bin: Path,
    model: ModelServer,
    terminal: Terminal,
    rollout: dict[str, bool] | None = None,
    extra: tuple[str, ...] = (),
    hooks: bool = False,
) -> None:
    """`agentmail install-mcp claude-code --channel` in the agent's workspace (a git
    repository), then Claude Code with the channel named, the start-up warning
    accepted. The owner is the `agentmail login` user of the config file. No
    prompt yet: Claude Code relays a permission dialog only to channel servers
    already connected, and ours takes seconds to start on a loaded machine."""
    work = agent.workspace
    home = work.parent / "home"
    config = home / ".config"
    (config / "agentmail").mkdir(parents=True)
    (config / "agentmail" / "config.json").write_text(
        json.dumps({"url": agent.url, "username": "admin"})
    )
    await anyio.run_process(["git", "init", "-q", str(work)])
    claude_json = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": ["dummy"], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True}},
        "cachedGrowthBookFeatures": ROLLOUT if rollout is None else rollout,  # test-only
    }
    (home / ".claude.json").write_text(json.dumps(claude_json))
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(REPO / "src"),
        "TERM": "xterm-256color",
        "XDG_CONFIG_HOME": str(config),
        "AGENTMAIL_URL": agent.url,
        "AGENTMAIL_KEY": agent.key,
    }
    install = [sys.executable, "-m", "mailui4agents.cli.main", "install-mcp", "claude-code",
               "--channel", "--project", str(work)]  # fmt: skip
    with anyio.fail_after(60):
        await anyio.run_process(install, env=env)
        if hooks:  # the interactive hooks as well (hooks/race.py, hooks/mail_in.py)
            await anyio.run_process(
                [sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "claude-code",
                 "--interactive", "--project", str(work)], env=env,
            )  # fmt: skip
    # Not DISABLE_TELEMETRY / CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: with either,
    # Claude Code reads no rollout flags and its channels stay off.
    terminal.start(
        [str(claude_bin), "--permission-mode", "default", *extra,
         "--dangerously-load-development-channels", "server:agentmail"],
        work,
        {**env, "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "dummy"},
    )  # fmt: skip
    if (ROLLOUT if rollout is None else rollout).get("tengu_harbor"):
        # Shown only when channels are on for the account.
        await terminal.wait_for(DEV_WARNING)
        terminal.keys("Enter")  # "I am using this for local development"
    await terminal.wait_for("? for shortcuts")


async def pending_request(human: Human, agent: Agent, deadline: float = 120.0) -> dict[str, Any]:
    with anyio.fail_after(deadline):
        while True:  # asked by the channel server: no event the test can wait on first
            r = await human.http.get(
                "/api/v1/permissions", params={"status": "pending"}, headers=human.auth
            )
            mine = [p for p in r.json()["items"] if p["agent"] == agent.name]
            if mine:
                return dict(mine[0])
            await anyio.sleep(0.05)


async def bound_session(human: Human, agent: Agent, deadline: float = 120.0) -> str:
    """The mail session the channel bound to this Claude Code session."""
    with anyio.fail_after(deadline):
        while True:
            r = await human.http.get("/api/v1/sessions", headers=human.auth)
            for session in r.json()["items"]:
                if str(session.get("platform_id") or "").startswith("claude-code:") and (
                    agent.name in json.dumps(session.get("participants"))
                ):
                    return str(session["id"])
            await anyio.sleep(0.05)


async def prompt(terminal: Terminal, text: str) -> None:
    terminal.keys("-l", text)
    terminal.keys("Enter")


async def told(model: ModelServer, text: str, deadline: float = 60.0) -> str:
    """The first model request that carries ``text`` (JSON of its body)."""
    with anyio.fail_after(deadline):
        while True:
            for request in model.messages_requests():
                body = json.dumps(request["body"])
                if text in body:
                    return body
            await anyio.sleep(0.05)


async def test_a_permission_prompt_is_relayed_and_a_remote_approval_closes_the_dialog(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    await launch(agent, claude_bin, model, terminal)
    await bound_session(owner, agent)  # the channel server is connected and ready
    await prompt(terminal, "create the marker")
    request = await pending_request(owner, agent)
    assert request["tool_name"] == "Bash" and request["tool_input"]["command"] == MARKER
    assert request["relay_key"].startswith("race:")  # the PermissionRequest hook's prefix
    await terminal.wait_for(DIALOG)
    assert not (agent.workspace / "marker.txt").exists()
    await owner.decide(request["id"], "approve")
    screen = await terminal.wait_for("DONE")
    assert DIALOG not in screen
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"


async def test_yes_in_the_terminal_first_the_channel_is_not_told_and_the_request_stays_open(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    """Pins Claude Code 2.1.197: a dialog answered in the terminal sends the channel
    nothing, so without the interactive hooks the remote request stays pending
    until it expires (docs/platforms.md)."""
    await launch(agent, claude_bin, model, terminal)
    await bound_session(owner, agent)
    await prompt(terminal, "create the marker")
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    terminal.keys("Enter")  # "1. Yes"
    await terminal.wait_for("DONE")
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    [still] = [p for p in await owner.pending(request["session_id"]) if p["id"] == request["id"]]
    assert still["status"] == "pending"


async def test_with_the_interactive_hooks_too_one_request_and_yes_in_the_terminal_withdraws_it(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    await launch(agent, claude_bin, model, terminal, hooks=True)
    await bound_session(owner, agent)
    await prompt(terminal, "create the marker")
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    terminal.keys("Enter")  # "1. Yes"
    await terminal.wait_for("DONE")
    with anyio.fail_after(30):  # PostToolUse withdraws by the shared relay key prefix
        while True:
            everything = await owner.all_permissions(request["session_id"])
            if all(p["status"] != "pending" for p in everything):
                break
            await anyio.sleep(0.05)
    assert [(p["id"], p["status"], p["decided_via"]["channel"]) for p in everything] == [
        (request["id"], "cancelled", "terminal")
    ]  # one dialog, one request (hooks/claims.py), answered in the terminal


async def test_a_remote_deny_reaches_the_model_with_the_note_as_a_channel_message(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    await launch(agent, claude_bin, model, terminal)
    await bound_session(owner, agent)  # the channel server is connected and ready
    await prompt(terminal, "create the marker")
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    await owner.decide(request["id"], "deny", note="use staging instead")
    body = await told(model, "use staging instead")
    assert '<channel source=\\"agentmail\\"' in body, body
    assert "Denied via channel agentmail" in json.dumps(
        [r["body"] for r in model.messages_requests()]
    )
    assert not (agent.workspace / "marker.txt").exists()


async def test_a_persons_mail_reaches_the_running_session_once_as_a_channel_message(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    def script(body: dict[str, Any]) -> Reply:
        said = " ".join(str(b.get("text", "")) for b in last_user_content(body))
        return Reply(text="GOT MAIL" if "<channel" in said else "READY")

    model.script = script
    await launch(agent, claude_bin, model, terminal)
    session_id = await bound_session(owner, agent)
    await prompt(terminal, "say ready")
    await terminal.wait_for("READY")
    [first, *_] = await owner.mails(session_id)
    sent = await owner.send(f"{agent.name}@{agent.workspace}",
                            "also update the CHANGELOG please", parent=first["id"])  # fmt: skip
    await terminal.wait_for("GOT MAIL")
    body = await told(model, "also update the CHANGELOG please")
    assert body.count("also update the CHANGELOG please") == 1, body
    assert f'mail_id=\\"{sent["id"]}\\"' in body, body
    r = await owner.http.get(
        "/api/v1/agent/inbox", params={"session_id": session_id},
        headers={"Authorization": f"Bearer {agent.key}"},
    )  # fmt: skip
    assert sent["id"] not in [m["id"] for m in r.json()["items"]]  # read: claimed once


async def test_without_the_rollout_flag_claude_code_refuses_the_channel_and_no_mail_is_claimed(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    model.script = lambda body: Reply(text="READY")
    debug = agent.workspace.parent / "claude-debug.log"
    await launch(agent, claude_bin, model, terminal, rollout={},
                 extra=("--debug-file", str(debug)))  # fmt: skip
    assert DEV_WARNING not in terminal.screen()  # no confirmation: the flag is ignored
    await prompt(terminal, "say ready")
    await terminal.wait_for("READY")
    # Claude Code logs its MCP servers' stderr: the server said why it claims nothing.
    # Claude Code says why it skips the channel.
    lines = (
        "rollout flag for channels (tengu_harbor) is not on",
        "Channel notifications skipped: channels feature is not currently available",
    )
    with anyio.fail_after(60):
        while True:
            if all(line in _read(debug) for line in lines):
                break
            await anyio.sleep(0.05)
    r = await owner.http.get("/api/v1/sessions", headers=owner.auth)
    assert (
        not [  # no session bound for this agent, no mail claimed
            s
            for s in r.json()["items"]
            if str(s.get("platform_id") or "").startswith("claude-code:")
            and agent.name in json.dumps(s.get("participants"))
        ]
    )


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
