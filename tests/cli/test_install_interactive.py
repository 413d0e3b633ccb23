"""`agentmail install-hook claude-code --interactive` (cli/install_interactive.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mailui4agents.cli import install
from mailui4agents.cli.main import main

FAKE = "/opt/agent mail/bin/agentmail"
EVENTS = ["PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
          "Notification", "Stop", "UserPromptSubmit"]  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(install, "agentmail_executable", lambda: FAKE)
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["install-hook", *args], catch_exceptions=False)


def commands(path: Path) -> dict[str, str]:
    hooks = json.loads(path.read_text())["hooks"]
    return {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}


def test_one_command_on_every_event_only_the_gate_fails_closed(project: Path) -> None:
    done = invoke("claude-code", "--interactive", "--project", str(project))
    assert done.exit_code == 0, done.output
    path = project / ".claude" / "settings.json"
    found = commands(path)
    assert list(found) == EVENTS
    base = "AGENTMAIL_INTERACTIVE=1 '/opt/agent mail/bin/agentmail' hook claude-code"
    assert found["PreToolUse"] == base + " || exit 2"
    # An exit 2 on Stop would keep the agent going; on UserPromptSubmit it
    # would swallow the prompt: those never fail closed.
    assert all(found[e] == base for e in EVENTS[1:]), found
    again = invoke("claude-code", "--interactive", "--project", str(project))
    assert "no change" in again.output


def test_switching_modes_updates_the_gate_in_place(project: Path) -> None:
    path = project / ".claude" / "settings.json"
    assert invoke("claude-code", "--project", str(project)).exit_code == 0
    assert "AGENTMAIL_INTERACTIVE" not in commands(path)["PreToolUse"]
    assert invoke("claude-code", "--interactive", "--project", str(project)).exit_code == 0
    hooks = json.loads(path.read_text())["hooks"]
    assert len(hooks["PreToolUse"]) == 1  # replaced, not added
    assert commands(path)["PreToolUse"].startswith("AGENTMAIL_INTERACTIVE=1 ")


@pytest.mark.parametrize(("platform", "folder"), [("gemini", ".gemini"), ("codex", ".codex")])
def test_platforms_without_a_race_are_refused_by_name(
    project: Path, platform: str, folder: str
) -> None:
    # Codex 0.171.0 runs PermissionRequest before its dialog (no race; pinned in
    # tests/bridge/test_codex_interactive_e2e.py); Gemini's BeforeTool blocks first.
    done = invoke(platform, "--interactive", "--project", str(project))
    assert done.exit_code != 0 and "--interactive is for claude-code" in done.output
    assert f"{platform} keeps its tool gate" in done.output
    assert not (project / folder).exists()
