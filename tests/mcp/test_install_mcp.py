"""``agentmail install-mcp``: the MCP server entry merged into each platform's config.

HOME, XDG_CONFIG_HOME and CODEX_HOME point into a temporary directory, so no real
agent config is ever read or written.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mailui4agents.cli import install
from mailui4agents.cli.main import main

AGENTMAIL = "/opt/agent mail/bin/agentmail"
PASSED = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_AGENT", "AGENTMAIL_SESSION_ID")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(fake_home / ".config"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setattr(install, "agentmail_executable", lambda: AGENTMAIL)
    return fake_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["install-mcp", *args], catch_exceptions=False)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_claude_code_gets_a_project_mcp_json_entry_that_passes_the_environment_through(
    project: Path,
) -> None:
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}), encoding="utf-8")
    result = invoke("claude-code", "--project", str(project))
    assert result.exit_code == 0, result.output
    assert f"Added the agentmail MCP server for claude-code to {mcp_json}." in result.output
    assert '+    "agentmail": {' in result.output  # the diff of what changed
    servers = load(mcp_json)["mcpServers"]
    assert servers["other"] == {"command": "x"}
    assert servers["agentmail"] == {
        "type": "stdio",
        "command": AGENTMAIL,
        "args": ["mcp"],
        "env": {**{name: f"${{{name}:-}}" for name in PASSED}, "AGENTMAIL_ASK_TIMEOUT": "50"},
    }

    again = invoke("claude-code", "--project", str(project))
    assert again.exit_code == 0
    assert "already in" in again.output and "no change" in again.output


def test_claude_code_without_a_project_writes_the_user_scope_in_claude_json(home: Path) -> None:
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3}), encoding="utf-8")
    assert invoke("claude-code").exit_code == 0
    settings = load(home / ".claude.json")
    assert settings["numStartups"] == 3
    assert settings["mcpServers"]["agentmail"]["args"] == ["mcp"]


def test_gemini_gets_a_timeout_in_milliseconds_above_the_ask_timeout(project: Path) -> None:
    assert invoke("gemini", "--project", str(project)).exit_code == 0
    entry = load(project / ".gemini" / "settings.json")["mcpServers"]["agentmail"]
    assert entry["timeout"] == 600_000  # Gemini's own default is already above 50 s
    assert entry["env"]["AGENTMAIL_SESSION_ID"] == "${AGENTMAIL_SESSION_ID}"

    assert invoke("gemini", "--project", str(project), "--ask-timeout", "900").exit_code == 0
    entry = load(project / ".gemini" / "settings.json")["mcpServers"]["agentmail"]
    assert entry["timeout"] == 1_080_000
    assert entry["env"]["AGENTMAIL_ASK_TIMEOUT"] == "900"


def test_opencode_gets_a_local_server_and_its_mcp_timeout_is_only_ever_raised(
    project: Path, home: Path
) -> None:
    assert invoke("opencode", "--project", str(project)).exit_code == 0
    config = load(project / "opencode.json")
    assert config["$schema"] == "https://opencode.ai/config.json"
    assert config["mcp"]["agentmail"] == {
        "type": "local",
        "command": [AGENTMAIL, "mcp"],
        "environment": {
            **{name: f"{{env:{name}}}" for name in PASSED},
            "AGENTMAIL_ASK_TIMEOUT": "50",
        },
        "enabled": True,
    }
    assert config["experimental"]["mcp_timeout"] == 80_000

    user_file = home / ".config" / "opencode" / "opencode.json"
    user_file.parent.mkdir(parents=True)
    user_file.write_text(json.dumps({"experimental": {"mcp_timeout": 600_000}}), encoding="utf-8")
    assert invoke("opencode").exit_code == 0
    assert load(user_file)["experimental"]["mcp_timeout"] == 600_000


def test_opencode_warns_when_the_ask_timeout_cannot_fit_its_tool_call_limit(project: Path) -> None:
    result = CliRunner().invoke(
        main, ["install-mcp", "opencode", "--project", str(project), "--ask-timeout", "300"]
    )
    assert result.exit_code == 0
    assert "to end every tool call after 120 s" in result.output


CODEX_BEFORE = """\
# my codex settings
model = "gpt-5"

[mcp_servers.agentmail]
command = "old-agentmail"
args = ["mcp"]

[mcp_servers.agentmail.env]
AGENTMAIL_URL = "http://old:8025"

[mcp_servers.other]
command = "npx"
args = ["-y", "other"]  # keep this comment
"""


def test_codex_replaces_an_old_table_in_place_and_keeps_everything_else(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_BEFORE, encoding="utf-8")
    result = invoke("codex")
    assert result.exit_code == 0, result.output
    text = config.read_text(encoding="utf-8")
    assert text.startswith('# my codex settings\nmodel = "gpt-5"\n\n[mcp_servers.agentmail]\n')
    assert text.endswith(CODEX_BEFORE[CODEX_BEFORE.index("[mcp_servers.other]") :])
    assert "old-agentmail" not in text and "http://old:8025" not in text
    data = tomllib.loads(text)
    assert data["model"] == "gpt-5"
    assert data["mcp_servers"]["other"] == {"command": "npx", "args": ["-y", "other"]}
    assert data["mcp_servers"]["agentmail"] == {
        "command": AGENTMAIL,
        "args": ["mcp"],
        "env_vars": [*PASSED, "XDG_CONFIG_HOME"],
        "startup_timeout_sec": 20,
        "tool_timeout_sec": 80,
        "env": {"AGENTMAIL_ASK_TIMEOUT": "50"},
    }
    assert invoke("codex").output.endswith("no change.\n")
    assert config.read_text(encoding="utf-8") == text


def test_codex_appends_the_table_to_a_project_config_and_respects_codex_home(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("codex", "--project", str(project)).exit_code == 0
    data = tomllib.loads((project / ".codex" / "config.toml").read_text(encoding="utf-8"))
    assert data["mcp_servers"]["agentmail"]["tool_timeout_sec"] == 80

    codex_home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    (codex_home).mkdir()
    (codex_home / "config.toml").write_text('model = "o4"', encoding="utf-8")  # no final newline
    assert invoke("codex", "--ask-timeout", "300").exit_code == 0
    text = (codex_home / "config.toml").read_text(encoding="utf-8")
    assert text.startswith('model = "o4"\n\n[mcp_servers.agentmail]\n')
    assert tomllib.loads(text)["mcp_servers"]["agentmail"]["tool_timeout_sec"] == 360


@pytest.mark.parametrize(
    "content",
    [
        '[mcp_servers]\nagentmail = { command = "x" }\n',  # an inline table: not editable as text
        "model = [unclosed\n",  # not TOML at all
    ],
)
def test_codex_config_it_cannot_edit_safely_is_left_untouched(home: Path, content: str) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(main, ["install-mcp", "codex"])
    assert result.exit_code == 1
    assert f"not changing {config}" in result.output
    assert config.read_text(encoding="utf-8") == content


def test_a_json_config_that_is_not_valid_json_is_left_untouched(project: Path) -> None:
    broken = project / ".mcp.json"
    broken.write_text("{ // a comment\n}", encoding="utf-8")
    result = CliRunner().invoke(main, ["install-mcp", "claude-code", "--project", str(project)])
    assert result.exit_code == 1
    assert "not valid JSON" in result.output
    assert broken.read_text(encoding="utf-8") == "{ // a comment\n}"


def test_claude_code_project_install_approves_the_server_in_the_local_settings(
    project: Path,
) -> None:
    """A project .mcp.json server stays "pending approval" (no tools in `claude -p`)
    until listed in enabledMcpjsonServers of .claude/settings.local.json."""
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"enabledMcpjsonServers": ["other"], "model": "x"}))
    shared = project / ".claude" / "settings.json"
    shared.write_text('{"keep": true}')
    result = invoke("claude-code", "--project", str(project))
    assert result.exit_code == 0, result.output
    assert "Approved the project's agentmail server" in result.output
    assert load(local) == {"enabledMcpjsonServers": ["other", "agentmail"], "model": "x"}
    assert shared.read_text() == '{"keep": true}'  # a committed file must not approve
    again = invoke("claude-code", "--project", str(project))
    assert "already approved" in again.output
    assert load(local)["enabledMcpjsonServers"] == ["other", "agentmail"]


def test_claude_code_user_install_writes_no_project_approval(home: Path, project: Path) -> None:
    assert invoke("claude-code").exit_code == 0
    assert not (home / ".claude" / "settings.local.json").exists()
    assert not (project / ".claude").exists()


def test_a_broken_local_settings_file_is_left_alone_and_the_approval_step_printed(
    project: Path,
) -> None:
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"enabledMcpjsonServers": "agentmail"}')
    result = CliRunner().invoke(main, ["install-mcp", "claude-code", "--project", str(project)])
    assert result.exit_code == 1
    assert "approve the server in `claude`" in result.output
    assert local.read_text() == '{"enabledMcpjsonServers": "agentmail"}'


def test_claude_code_channel_install_runs_the_server_as_a_channel_and_says_how_to_start(
    project: Path,
) -> None:
    result = invoke("claude-code", "--channel", "--project", str(project))
    assert result.exit_code == 0, result.output
    assert load(project / ".mcp.json")["mcpServers"]["agentmail"]["args"] == ["mcp", "--channel"]
    assert "claude --dangerously-load-development-channels server:agentmail" in result.output
    plain = invoke("claude-code", "--project", str(project))  # back to the plain server
    assert load(project / ".mcp.json")["mcpServers"]["agentmail"]["args"] == ["mcp"], plain.output


def test_only_claude_code_has_channels(project: Path) -> None:
    result = invoke("gemini", "--channel", "--project", str(project))
    assert result.exit_code != 0
    assert "channels are Claude Code's" in result.output
    assert not (project / ".gemini").exists()
