"""``agentmail install-hook``: merging the approval hook into platform settings.

Every test runs with HOME pointing at a temporary directory, so the real
``~/.claude`` and ``~/.gemini`` are never read or written.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.needs import missing

from mailui4agents.cli import install
from mailui4agents.cli.main import main

CLAUDE_MATCHER = "Bash|PowerShell|Write|Edit|MultiEdit|NotebookEdit|Monitor"
GEMINI_MATCHER = "run_shell_command|write_file|replace"
FAKE_AGENTMAIL = "/opt/agent mail/bin/agentmail"  # a space: the command must quote it


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME, and a known `agentmail` path for the hook command."""
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("AGENTMAIL_HOOK_TIMEOUT", raising=False)
    monkeypatch.setattr(install, "agentmail_executable", lambda: FAKE_AGENTMAIL)
    return fake_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["install-hook", *args], catch_exceptions=False)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def our_handlers(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        handler
        for group in settings["hooks"][event]
        for handler in group["hooks"]
        if "hook claude-code" in handler["command"] or "hook gemini" in handler["command"]
    ]


def test_fresh_claude_code_install_into_the_home_settings(home: Path) -> None:
    result = invoke("claude-code")

    assert result.exit_code == 0, result.output
    path = home / ".claude" / "settings.json"
    assert load(path) == {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": CLAUDE_MATCHER,
                    "hooks": [
                        {
                            "type": "command",
                            "command": "'/opt/agent mail/bin/agentmail' hook claude-code || exit 2",
                            "timeout": 600,
                        }
                    ],
                }
            ]
        },
        "disableAllHooks": False,
    }
    assert "+++ " in result.output and '"disableAllHooks": false' in result.output  # the diff
    assert str(path) in result.output
    assert not list(path.parent.glob("*.tmp"))  # the temporary file was renamed, not left


def test_project_install_with_a_timeout_writes_seconds_and_the_hook_s_own_deadline(
    home: Path, project: Path
) -> None:
    result = invoke("claude-code", "--project", str(project), "--timeout", "3600")

    assert result.exit_code == 0, result.output
    path = project / ".claude" / "settings.json"
    [handler] = our_handlers(load(path), "PreToolUse")
    assert handler["timeout"] == 3600
    # The hook must give up (and deny) before Claude Code kills it (which would allow).
    assert handler["command"] == (
        "AGENTMAIL_HOOK_TIMEOUT=3240 '/opt/agent mail/bin/agentmail' hook claude-code || exit 2"
    )
    assert not (home / ".claude").exists()  # only the project was touched

    back = invoke("claude-code", "--project", str(project))  # to the default again

    assert back.exit_code == 0, back.output
    [handler] = our_handlers(load(path), "PreToolUse")
    assert handler == {
        "type": "command",
        "command": "'/opt/agent mail/bin/agentmail' hook claude-code || exit 2",
        "timeout": 600,
    }


@pytest.mark.parametrize(("timeout", "wait"), [(600, 540), (60, 50), (15, 5), (86400, 77760)])
def test_the_hook_deadline_stays_below_the_platform_timeout(timeout: int, wait: int) -> None:
    assert install.hook_wait(timeout) == wait


def test_a_timeout_too_short_for_a_person_is_a_usage_error(home: Path) -> None:
    result = invoke("claude-code", "--timeout", "5")

    assert result.exit_code == 2
    assert not (home / ".claude").exists()


def test_an_exported_hook_timeout_that_outlasts_the_platform_is_warned_about(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTMAIL_HOOK_TIMEOUT", "900")

    result = invoke("claude-code")

    assert result.exit_code == 0
    assert "AGENTMAIL_HOOK_TIMEOUT=900" in result.output and "540" in result.output


def test_a_second_run_changes_nothing_and_says_so(home: Path, project: Path) -> None:
    assert invoke("claude-code", "--project", str(project)).exit_code == 0
    path = project / ".claude" / "settings.json"
    before = path.read_bytes()
    os.utime(path, (1_000_000, 1_000_000))

    again = invoke("claude-code", "--project", str(project))

    assert again.exit_code == 0, again.output
    assert "already installed" in again.output
    assert "+++" not in again.output
    assert path.read_bytes() == before
    assert path.stat().st_mtime == 1_000_000  # not even rewritten
    assert len(our_handlers(load(path), "PreToolUse")) == 1


def test_merges_with_existing_hooks_and_keys_without_removing_them(
    project: Path, home: Path
) -> None:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs: dict[str, Any] = {
        "model": "opus",
        "permissions": {"allow": ["Read"], "deny": ["Bash(rm *)"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint-bash"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-done"}]}],
        },
        "disableAllHooks": True,
    }
    path.write_text(json.dumps(theirs), encoding="utf-8")
    path.chmod(0o640)

    result = invoke("claude-code", "--project", str(project))

    assert result.exit_code == 0, result.output
    merged = load(path)
    assert merged["model"] == "opus"
    assert merged["permissions"] == theirs["permissions"]
    assert merged["hooks"]["Stop"] == theirs["hooks"]["Stop"]
    assert merged["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert merged["hooks"]["PreToolUse"][1]["matcher"] == CLAUDE_MATCHER
    assert len(merged["hooks"]["PreToolUse"]) == 2
    assert merged["disableAllHooks"] is False
    assert "disableAllHooks" in result.output  # said, not done silently
    assert list(merged) == ["model", "permissions", "hooks", "disableAllHooks"]  # order kept
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # permission bits kept


def test_an_earlier_entry_with_another_path_is_updated_in_place_not_duplicated(
    project: Path, home: Path
) -> None:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir()
    old = {"type": "command", "command": "agentmail hook claude-code", "timeout": 60}
    other = {"type": "command", "command": "audit-log"}
    first = {"matcher": "Read", "hooks": [{"type": "command", "command": "x"}]}
    path.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [old, other]}, first]}}),
        encoding="utf-8",
    )

    assert invoke("claude-code", "--project", str(project)).exit_code == 0

    groups = load(path)["hooks"]["PreToolUse"]
    assert groups == [
        {
            "matcher": CLAUDE_MATCHER,
            "hooks": [
                {
                    "type": "command",
                    "command": "'/opt/agent mail/bin/agentmail' hook claude-code || exit 2",
                    "timeout": 600,
                }
            ],
        },
        {"matcher": "Bash", "hooks": [other]},  # the other handler of that group stays
        first,
    ]


@pytest.mark.parametrize(
    "content",
    ['{"model": "opus",', '// my settings\n{"model": "opus"}', "[1, 2]", '{"hooks": []}'],
)
def test_a_settings_file_that_cannot_be_merged_is_refused_untouched(
    project: Path, home: Path, content: str
) -> None:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")

    result = invoke("claude-code", "--project", str(project))

    assert result.exit_code == 1
    assert "not changing" in result.output and str(path) in result.output
    assert path.read_text(encoding="utf-8") == content
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_invalid_json_says_so(project: Path, home: Path) -> None:
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"theme": "dark",}', encoding="utf-8")

    result = invoke("gemini", "--project", str(project))

    assert result.exit_code == 1
    assert "not valid JSON" in result.output


def test_gemini_writes_a_before_tool_hook_with_the_timeout_in_milliseconds(
    project: Path, home: Path
) -> None:
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"theme": "dark", "hooks": {"AfterAgent": []}}), encoding="utf-8")

    default = invoke("gemini", "--project", str(project))

    assert default.exit_code == 0, default.output
    settings = load(path)
    assert settings["theme"] == "dark" and settings["hooks"]["AfterAgent"] == []
    assert "disableAllHooks" not in settings  # a Claude Code key; Gemini has none
    assert settings["hooks"]["BeforeTool"] == [
        {
            "matcher": GEMINI_MATCHER,
            "hooks": [
                {
                    "name": "agentmail",
                    "type": "command",
                    "command": "'/opt/agent mail/bin/agentmail' hook gemini || exit 2",
                    "timeout": 60000,
                }
            ],
        }
    ]
    assert "already installed" in invoke("gemini", "--project", str(project)).output

    longer = invoke("gemini", "--project", str(project), "--timeout", "900")

    assert longer.exit_code == 0, longer.output
    [handler] = our_handlers(load(path), "BeforeTool")
    assert handler["timeout"] == 900_000
    assert handler["command"].startswith("AGENTMAIL_HOOK_TIMEOUT=810 ")
    assert '"timeout": 900000' in longer.output  # the diff shows the change


def test_gemini_warns_when_its_hooks_are_switched_off(project: Path, home: Path) -> None:
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"hooksConfig": {"enabled": False}}), encoding="utf-8")

    result = invoke("gemini", "--project", str(project))

    assert result.exit_code == 0
    assert "hooksConfig.enabled" in result.output
    assert load(path)["hooksConfig"] == {"enabled": False}  # the person's choice, untouched


def test_a_symlinked_settings_file_keeps_its_link(
    project: Path, home: Path, tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}', encoding="utf-8")
    link = project / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)

    assert invoke("claude-code", "--project", str(project)).exit_code == 0

    assert link.is_symlink()
    assert load(real)["model"] == "opus"
    assert len(our_handlers(load(real), "PreToolUse")) == 1


def test_the_executable_is_the_running_script_else_the_one_on_path(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "agentmail"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n", encoding="utf-8")

    def nowhere(name: str) -> str | None:
        return None

    assert install.agentmail_executable(str(script), which=nowhere) == str(script)
    assert install.agentmail_executable("agentmail", which=lambda n: str(script)) == str(script)
    pytest_argv0 = str(tmp_path / "pytest")
    assert install.agentmail_executable(pytest_argv0, which=lambda n: "/usr/bin/agentmail") == (
        "/usr/bin/agentmail"
    )
    assert install.agentmail_executable(pytest_argv0, which=nowhere) is None
    assert install.hook_command(install.GEMINI, None) == "agentmail hook gemini || exit 2"


def test_the_real_script_writes_its_own_absolute_path(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("agentmail")
    if not script.exists():
        missing("no installed agentmail console script (make .venv/.installed-stamp installs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env.update(HOME=str(tmp_path), PATH="/usr/bin:/bin")  # not found via PATH

    done = subprocess.run(
        [str(script), "install-hook", "claude-code"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    settings = load(tmp_path / ".claude" / "settings.json")
    [handler] = our_handlers(settings, "PreToolUse")
    assert handler["command"] == f"{script} hook claude-code || exit 2"
    assert "warning" not in done.stderr


def test_an_installed_hook_that_cannot_start_blocks_instead_of_allowing(tmp_path: Path) -> None:
    """Claude Code and Gemini treat exit 1/127 as "go ahead"; only exit 2 blocks."""
    missing = tmp_path / "no-such-agentmail"
    command = install.hook_command(install.CLAUDE_CODE, str(missing))
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    ok = subprocess.run(
        ["sh", "-c", install.hook_command(install.CLAUDE_CODE, "true")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ok.returncode == 0  # a hook that runs decides by its JSON, not by this guard
