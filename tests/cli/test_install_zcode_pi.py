"""``agentmail install-hook zcode|pi`` and ``install-mcp zcode|pi``: idempotent,
merged, with a diff (HOME is a temporary directory in every test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mailui4agents.bridge.runners.pi import extension_path
from mailui4agents.bridge.runners.zcode import config_path, hook_installed
from mailui4agents.cli import install
from mailui4agents.cli.main import main

FAKE_AGENTMAIL = "/opt/agent mail/bin/agentmail"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.delenv("AGENTMAIL_HOOK_TIMEOUT", raising=False)
    monkeypatch.setattr(install, "agentmail_executable", lambda: FAKE_AGENTMAIL)
    return fake_home


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_zcode_hook_goes_into_hooks_events_keeping_the_rest_and_a_rerun_changes_nothing(
    home: Path,
) -> None:
    path = config_path(home)
    path.parent.mkdir(parents=True)
    other = {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}
    path.write_text(json.dumps({"model": "glm", "hooks": {"events": {"PreToolUse": [other]}}}))
    assert not hook_installed(path)
    first = invoke("install-hook", "zcode")
    assert first.exit_code == 0 and "+++" in first.output, first.output
    config = json.loads(path.read_text())
    assert config["model"] == "glm"
    groups = config["hooks"]["events"]["PreToolUse"]
    assert groups[0] == other
    command = "'/opt/agent mail/bin/agentmail' hook zcode || exit 2"
    assert groups[1]["hooks"] == [{"type": "command", "timeout": 60, "command": command}]
    assert hook_installed(path)  # what the zcode runner checks before every turn
    before = path.read_bytes()
    again = invoke("install-hook", "zcode")
    assert "already installed" in again.output and path.read_bytes() == before


def test_zcode_is_user_level_only(home: Path, tmp_path: Path) -> None:
    result = invoke("install-hook", "zcode", "--project", str(tmp_path))
    assert result.exit_code != 0 and "user's config only" in result.output
    result = invoke("install-mcp", "zcode", "--project", str(tmp_path))
    assert result.exit_code != 0 and "user's config only" in result.output


def test_pi_gate_extension_is_written_with_this_agentmail_and_a_rerun_changes_nothing(
    home: Path,
) -> None:
    result = invoke("install-hook", "pi")
    assert result.exit_code == 0, result.output
    path = home / ".pi" / "agent" / "extensions" / "agentmail.ts"
    text = path.read_text()
    assert f'const DEFAULT_COMMAND: string[] = ["{FAKE_AGENTMAIL}", "hook", "pi"];' in text
    shipped = extension_path().read_text()
    assert text.replace(FAKE_AGENTMAIL, "agentmail") == shipped  # only that line differs
    again = invoke("install-hook", "pi")
    assert "already installed" in again.output and path.read_text() == text


def test_pi_project_install_goes_to_its_extensions_folder(home: Path, tmp_path: Path) -> None:
    assert invoke("install-hook", "pi", "--project", str(tmp_path)).exit_code == 0
    assert (tmp_path / ".pi" / "extensions" / "agentmail.ts").is_file()
    assert not (home / ".pi").exists()


def test_zcode_mcp_server_goes_into_mcp_servers(home: Path) -> None:
    assert invoke("install-mcp", "zcode").exit_code == 0
    entry = json.loads(config_path(home).read_text())["mcp"]["servers"]["agentmail"]
    assert entry["command"] == FAKE_AGENTMAIL and entry["args"] == ["mcp"]
    assert "AGENTMAIL_KEY" not in json.dumps(entry)  # never a key in a config file
    assert "no change" in invoke("install-mcp", "zcode").output


def test_pi_has_no_mcp_client_and_says_what_to_use(home: Path) -> None:
    result = invoke("install-mcp", "pi")
    assert result.exit_code != 0 and "install-hook pi" in result.output
    assert not (home / ".pi").exists()
