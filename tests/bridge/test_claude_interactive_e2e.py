"""The real Claude Code CLI in a real terminal (tmux), with
`agentmail install-hook claude-code --interactive`: the terminal's dialog and the
remote deciders race, and the first answer wins (docs/remote.md, "Answered in
the terminal"; docs/platforms.md, "Interactive sessions").

No AGENTMAIL_OWNER is set: the session's owner is the `agentmail login` user of
the config file (the agent's owner, admin), which only the interactive install
allows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.bridge.harness import Agent, Human
from tests.bridge.tmux import Terminal, claude_in_terminal
from tests.fakes.model_server import ModelServer, Reply, bash_then_answer, last_user_content

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

MARKER = "echo hi > marker.txt"
DIALOG = "Do you want to proceed?"


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(bash_then_answer(MARKER, "DONE")) as server:
        yield server


def launch(agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal) -> None:
    """Claude Code in the terminal, in the agent's workspace, asked to create the
    marker; the config file names the owner as `agentmail login` leaves it."""
    home = agent.workspace.parent / "home"
    config = home / ".config"
    (config / "agentmail").mkdir(parents=True)
    (config / "agentmail" / "config.json").write_text(
        json.dumps({"url": agent.url, "username": "admin"})
    )
    env = {"XDG_CONFIG_HOME": str(config), "AGENTMAIL_URL": agent.url, "AGENTMAIL_KEY": agent.key}
    claude_in_terminal(
        terminal, claude_bin, agent.workspace, home, model.url, "create the marker", env
    )


async def pending_request(human: Human, agent: Agent, deadline: float = 120.0) -> dict[str, Any]:
    """The agent's first pending request (its session was bound by the hook)."""
    with anyio.fail_after(deadline):
        while True:  # the binding is the hook's, not an event the test can wait on
            r = await human.http.get(
                "/api/v1/permissions", params={"status": "pending"}, headers=human.auth
            )
            mine = [p for p in r.json()["items"] if p["agent"] == agent.name]
            if mine:
                return dict(mine[0])
            await anyio.sleep(0.05)


async def settled(human: Human, request: dict[str, Any], deadline: float) -> dict[str, Any]:
    with anyio.fail_after(deadline):
        while True:
            for p in await human.all_permissions(request["session_id"]):
                if p["id"] == request["id"] and p["status"] != "pending":
                    return p
            await anyio.sleep(0.02)


async def test_approve_remotely_while_the_dialog_is_up_runs_the_tool_and_closes_the_dialog(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    launch(agent, claude_bin, model, terminal)
    request = await pending_request(owner, agent)
    assert request["tool_name"] == "Bash" and request["tool_input"]["command"] == MARKER
    await terminal.wait_for(DIALOG)
    assert not (agent.workspace / "marker.txt").exists()
    session = (await owner.http.get(f"/api/v1/sessions/{request['session_id']}",
                                    headers=owner.auth)).json()  # fmt: skip
    assert session["deciders"] == ["admin"]  # the login user, with no AGENTMAIL_OWNER set
    await owner.decide(request["id"], "approve")
    screen = await terminal.wait_for("Allowed by PermissionRequest hook")
    assert DIALOG not in screen
    await terminal.wait_for("DONE")
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"


async def test_yes_in_the_terminal_first_withdraws_the_remote_request_at_once(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    launch(agent, claude_bin, model, terminal)
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    pressed = time.monotonic()
    terminal.keys("Enter")  # "1. Yes" is selected
    closed = await settled(owner, request, deadline=30)
    took = time.monotonic() - pressed
    print(f"withdrawn {took:.3f} s after Enter")  # the figure, for docs/bench
    assert closed["status"] == "cancelled"
    assert closed["decided_via"]["channel"] == "terminal"
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    # A late tap on the phone finds it answered; the page says where.
    r = await owner.http.post(f"/api/v1/permissions/{request['id']}/decision",
                              json={"decision": "approve"}, headers=owner.auth)  # fmt: skip
    assert r.status_code == 409, r.text
    assert "answered in the terminal" in r.json()["error"]["message"]
    # Pages render the same state ("Answered in the terminal"): tests/web.
    await terminal.wait_for("DONE")


async def test_deny_remotely_with_a_note_the_model_is_told_the_note(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    launch(agent, claude_bin, model, terminal)
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    await owner.decide(request["id"], "deny", note="use staging instead")
    await terminal.wait_for("Denied by PermissionRequest hook")
    await terminal.wait_for("DONE")
    assert "use staging instead" in model.told()
    assert not (agent.workspace / "marker.txt").exists()


async def test_esc_in_the_terminal_withdraws_the_remote_request_before_the_hook_exits(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    """Esc (or "No") aborts the turn and Claude Code sends the waiting hook SIGTERM."""
    launch(agent, claude_bin, model, terminal)
    request = await pending_request(owner, agent)
    await terminal.wait_for(DIALOG)
    terminal.keys("Escape")
    closed = await settled(owner, request, deadline=30)
    assert closed["status"] == "cancelled"
    assert closed["decided_via"]["channel"] == "terminal"
    await terminal.wait_for("Interrupted")
    assert not (agent.workspace / "marker.txt").exists()


async def test_mail_sent_while_the_agent_works_reaches_it_at_its_next_stop_once(
    owner: Human, agent: Agent, claude_bin: Path, model: ModelServer, terminal: Terminal
) -> None:
    """The Stop hook answers `decision: block` with the mail: the model's next
    request carries it, once; the mail is then read (hooks/mail_in.py)."""
    plain = bash_then_answer(MARKER, "DONE")

    def script(body: dict[str, Any]) -> Reply:
        said = " ".join(str(b.get("text", "")) for b in last_user_content(body))
        return Reply(text="ON IT") if "Stop hook feedback" in said else plain(body)

    model.script = script
    launch(agent, claude_bin, model, terminal)
    request = await pending_request(owner, agent)
    [first, *_] = await owner.mails(request["session_id"])
    sent = await owner.send(f"{agent.name}@{agent.workspace}",
                            "also update the CHANGELOG please", parent=first["id"])  # fmt: skip
    await owner.decide(request["id"], "approve")
    await terminal.wait_for("ON IT")
    last = json.dumps(model.messages_requests()[-1]["body"])
    assert last.count("also update the CHANGELOG please") == 1, last
    assert "Stop hook feedback" in last
    r = await owner.http.get(
        "/api/v1/agent/inbox", params={"session_id": request["session_id"]},
        headers={"Authorization": f"Bearer {agent.key}"},
    )  # fmt: skip
    unread = [m["id"] for m in r.json()["items"]]
    assert sent["id"] not in unread  # read: a later stop or prompt does not bring it again
