"""`agentmail install-hook codex`: Codex's hooks.json, merged, idempotent, fail closed.
(The real Codex CLI runs the installed file in tests/bridge/test_codex_e2e.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mailui4agents.cli import install
from mailui4agents.cli.main import main

FAKE_AGENTMAIL = "/opt/agent mail/bin/agentmail"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("AGENTMAIL_HOOK_TIMEOUT", raising=False)
    monkeypatch.setattr(install, "agentmail_executable", lambda: FAKE_AGENTMAIL)
    return fake_home


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["install-hook", *args], catch_exceptions=False)


def test_user_install_goes_to_codex_home_hooks_json_and_a_second_run_changes_nothing(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = invoke("codex")
    assert done.exit_code == 0, done.output
    path = home / ".codex" / "hooks.json"
    [group] = json.loads(path.read_text())["hooks"]["PreToolUse"]
    [handler] = group["hooks"]
    assert group["matcher"] == "*" and handler["timeout"] == 600
    assert handler["command"].startswith("'/opt/agent mail/bin/agentmail' hook codex || {")
    assert "+++" in done.output and "/hooks" in done.output  # the diff, and how to trust it
    again = invoke("codex")
    assert "already installed" in again.output and "+++" not in again.output
    elsewhere = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(elsewhere))
    assert invoke("codex").exit_code == 0
    assert (elsewhere / "hooks.json").exists()


def test_project_install_keeps_other_hooks(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".codex").mkdir(parents=True)
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint-hook"}]}
    (project / ".codex" / "hooks.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [theirs]}, "other": 1})
    )
    assert invoke("codex", "--project", str(project), "--timeout", "120").exit_code == 0
    data = json.loads((project / ".codex" / "hooks.json").read_text())
    assert data["other"] == 1 and data["hooks"]["PreToolUse"][0] == theirs
    ours = data["hooks"]["PreToolUse"][1]["hooks"][0]
    assert ours["timeout"] == 120 and ours["command"].startswith("AGENTMAIL_HOOK_TIMEOUT=108 ")


def test_a_hook_that_cannot_start_blocks_with_a_reason_on_stderr(tmp_path: Path) -> None:
    """Codex 0.171 blocks on exit 2 only when stderr says why (an empty stderr
    let the command run), so the wrapper writes a reason."""
    command = install.hook_command(install.CODEX, str(tmp_path / "no-such-agentmail"))
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "blocked" in result.stderr
    ok = subprocess.run(["sh", "-c", install.hook_command(install.CODEX, "true")],
                        capture_output=True, text=True, timeout=30)  # fmt: skip
    assert ok.returncode == 0 and ok.stderr == ""
