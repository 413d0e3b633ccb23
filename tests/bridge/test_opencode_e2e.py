"""The real opencode CLI (pinned in agent-clis.txt): one bridge, hence one
``opencode serve``, shared by the whole module (opencode takes seconds a turn),
against a real gateway and the scripted Chat Completions server. Each scenario
works in a workspace of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import GatewayProcess
from tests.bridge.agent_clis import require
from tests.bridge.harness import Agent, Human
from tests.conftest import ADMIN_PASSWORD
from tests.fakes.openai_chat import ChatServer, answer, fail_with, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(420)]

MARKER = "echo hi > marker.txt"
TURN_S = 180.0  # opencode is slow on 2 loaded cores


@pytest.fixture(scope="module")
def model() -> Iterator[ChatServer]:
    with ChatServer(shell_then_answer(MARKER, "DONE")) as server:
        yield server


def opencode_home(root: Path, model: ChatServer, **extra: object) -> Path:
    home = root / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                              "options": {"baseURL": model.url, "apiKey": "dummy"},
                              "models": {"fake-model": {"name": "Fake", "tool_call": True}}}},
        "model": "fake/fake-model", "small_model": "fake/fake-model",
        "autoupdate": False, "share": "disabled", **extra,
    }  # fmt: skip
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config))
    return home


def xdg_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
    }


@pytest.fixture(scope="module")
def served(
    gateway: GatewayProcess, model: ChatServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Agent]:
    """One agent and one bridge (one `opencode serve`) for every scenario."""
    opencode_bin = require("opencode-ai")
    root = tmp_path_factory.mktemp("opencode")
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        r = http.post("/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        # ana may set it to work in its folder (docs/access.md).
        team = {
            "name": "opencoder",
            "taskers": ["ana"],
            "workspaces": [f"{root}/**"],
            "max_mode": {"taskers": "full"},
        }
        r = http.post("/api/v1/admin/agents", json=team,
                      headers={"Authorization": f"Bearer {r.json()['token']}"})  # fmt: skip
        assert r.status_code == 201, r.text
        key = r.json()["key"]
    (root / "work").mkdir()
    agent = Agent("opencoder", key, root / "work", root / "state", root / "agent.log",
                  root / "fake-state", gateway.url)  # fmt: skip
    home = opencode_home(root, model)
    xdg = xdg_env(home)
    bridge = agent.bridge("--runner-arg", f"bin={opencode_bin}",
                          "--runner-arg", f"data_dir={home / '.local/share'}",
                          runner="opencode", start_timeout=120, env=xdg)  # fmt: skip
    try:
        yield agent
    finally:
        for process in agent.bridges:
            process.stop()  # SIGTERM: the bridge stops opencode serve with SIGINT
        (root / "bridge.log").write_text(bridge.log)


def workspace(agent: Agent, name: str) -> Path:
    path = agent.workspace.parent / name
    path.mkdir()
    return path


async def test_approve_runs_the_command_the_answer_comes_back_and_the_next_mail_resumes(
    human: Human, served: Agent, model: ChatServer
) -> None:
    model.script = shell_then_answer(MARKER, "DONE")
    work = workspace(served, "approve")
    sent = await human.send(f"{served.name}@{work}.new", "create the marker", mode="workspace")
    request = await human.wait_pending(sent["session_id"], TURN_S)
    assert request["tool_name"] == "bash" and request["tool_input"]["command"] == MARKER
    assert not (work / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert (work / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["body"].startswith("DONE")
    assert "NEW TASK from a human (ana@" in model.told()
    sessions = json.loads((served.state_dir / "sessions.json").read_text())
    platform_id = sessions[sent["session_id"]]
    assert platform_id.startswith("ses_")
    # The second mail of the mail session resumes the same opencode session.
    model.script = answer("noted")
    before = len(model.chat_requests())
    second = await human.send(f"{served.name}@{work}", "and again, please", parent=sent["id"])
    await human.wait_reply(second["session_id"], second["id"], TURN_S)
    later = json.dumps([r["body"] for r in model.chat_requests()[before:]])
    assert "create the marker" in later and "and again, please" in later
    assert json.loads((served.state_dir / "sessions.json").read_text())[sent["session_id"]] == (
        platform_id
    )


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, served: Agent, model: ChatServer
) -> None:
    model.script = shell_then_answer(MARKER, "DONE")
    work = workspace(served, "deny")
    sent = await human.send(f"{served.name}@{work}.new", "create the marker", mode="workspace")
    request = await human.wait_pending(sent["session_id"], TURN_S)
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert not (work / "marker.txt").exists()
    assert any("use the staging database" in r for r in model.tool_results())
    assert reply["type"] == "relay" and "use the staging database" in reply["body"]


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, served: Agent, model: ChatServer
) -> None:
    model.script = shell_then_answer(MARKER, "DONE")
    plan_work, full_work = workspace(served, "plan"), workspace(served, "full")
    # Both at once: two sessions run in parallel on the one server.
    plan = await human.send(f"{served.name}@{plan_work}.new", "create the marker", mode="plan")
    full = await human.send(f"{served.name}@{full_work}.new", "create the marker", mode="full")
    await human.wait_reply(plan["session_id"], plan["id"], TURN_S)
    await human.wait_reply(full["session_id"], full["id"], TURN_S)
    assert not (plan_work / "marker.txt").exists()
    assert (full_work / "marker.txt").read_text() == "hi\n"
    assert await human.all_permissions(plan["session_id"]) == []
    assert await human.all_permissions(full["session_id"]) == []


async def test_a_bad_key_mails_the_human_what_to_do(
    human: Human, served: Agent, model: ChatServer
) -> None:
    model.script = fail_with(401, "invalid_api_key", "Incorrect API key provided")
    work = workspace(served, "badkey")
    sent = await human.send(f"{served.name}@{work}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert reply["type"] == "failure" and "not logged in" in reply["body"], reply["body"]


async def test_opencode_sessions_are_reported_for_adoption(served: Agent) -> None:
    """The heartbeat's platform sessions come from opencode's own database."""
    from mailui4agents.bridge.runners.opencode import recent_sessions

    db = served.workspace.parent / "home" / ".local/share" / "opencode" / "opencode.db"
    found = recent_sessions(db)
    assert found and all(s["platform_id"].startswith("ses_") for s in found)
    assert str(served.workspace.parent / "approve") in {s["cwd"] for s in found}
