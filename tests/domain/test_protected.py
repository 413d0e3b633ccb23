"""Tests for protected paths: no agent may touch its own guard, whatever mode or grant."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.protected import protected_paths, touches_protected

HOME = "/home/u"
PKG = "/opt/venv/lib/python3.11/site-packages/mailui4agents"
DATA = "/var/lib/agentmail-data"
CWD = "/home/u/proj"


def paths(env: dict[str, str] | None = None, extra: list[str] | None = None) -> list[str]:
    return protected_paths(DATA, extra or [], home=HOME, env=env or {}, package_dir=PKG)


PROTECTED = paths(extra=["/srv/vault"])


def touches(tool: str, tool_input: Mapping[str, object], cwd: str = CWD) -> str | None:
    return touches_protected(tool, tool_input, PROTECTED, cwd, home=HOME)


# --- protected_paths -------------------------------------------------------------------


def test_the_list_holds_every_protected_place() -> None:
    listed = paths(extra=["/srv/vault"])
    for expected in [
        DATA,
        "/home/u/.config/agentmail",
        PKG,
        "/home/u/.ssh",
        "/home/u/.gnupg",
        "/etc/systemd",
        "/home/u/.config/systemd",
        "/home/u/.claude/settings.json",
        "/home/u/.claude/settings.local.json",
        "/home/u/.gemini/settings.json",
        "/srv/vault",
    ]:
        assert expected in listed


def test_the_config_dir_follows_xdg_config_home_and_keeps_the_default_too() -> None:
    listed = paths(env={"XDG_CONFIG_HOME": "/cfg"})
    assert "/cfg/agentmail" in listed
    assert "/cfg/systemd" in listed
    assert "/home/u/.config/agentmail" in listed


def test_claude_config_dir_moves_the_claude_settings_that_are_protected() -> None:
    listed = paths(env={"CLAUDE_CONFIG_DIR": "/etc/cc"})
    assert "/etc/cc/settings.json" in listed
    assert "/etc/cc/settings.local.json" in listed


def test_the_list_is_normalised_without_duplicates_and_without_blanks() -> None:
    listed = protected_paths(
        "/var/data/", ["/var/data", "", "/srv/x/../y"], home=HOME, env={}, package_dir=None
    )
    assert listed.count("/var/data") == 1
    assert "/srv/y" in listed
    assert "" not in listed
    assert len(listed) == len(set(listed))


def test_without_a_data_dir_or_package_dir_the_rest_is_still_protected() -> None:
    listed = protected_paths(None, [], home=HOME, env={}, package_dir=None)
    assert "/home/u/.ssh" in listed
    assert "/home/u/.config/agentmail" in listed


# --- file tools ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("Write", {"file_path": "/var/lib/agentmail-data/agentmail.db"}, DATA),
        ("Edit", {"file_path": "/var/lib/agentmail-data"}, DATA),
        ("Write", {"file_path": PKG + "/domain/policy.py"}, PKG),
        ("MultiEdit", {"file_path": "/home/u/.config/agentmail/config.json"}, None),
        ("Write", {"file_path": "/home/u/.ssh/authorized_keys"}, "/home/u/.ssh"),
        ("Write", {"file_path": "/etc/systemd/system/agentmail.service"}, "/etc/systemd"),
        ("Write", {"file_path": "/home/u/.claude/settings.json"}, None),
        ("write_file", {"path": "/home/u/.gemini/settings.json"}, None),
        ("replace", {"file_path": "/srv/vault/x"}, "/srv/vault"),
        ("NotebookEdit", {"notebook_path": "/srv/vault/n.ipynb"}, "/srv/vault"),
    ],
)
def test_a_file_tool_writing_inside_a_protected_path_is_caught(
    tool: str, tool_input: dict[str, object], expected: str | None
) -> None:
    hit = touches(tool, tool_input)
    assert hit is not None
    if expected is not None:
        assert hit == expected


@pytest.mark.parametrize(
    "file_path",
    [
        "../.ssh/id_ed25519.pub",
        "../../u/.ssh/config",
        "~/.ssh/config",
        "~/.config/agentmail/config.json",
        "/home/u/proj/../.ssh/x",
        "/home/u//.ssh/x",
        "/home/u/./.gnupg/x",
        "/HOME/U/.SSH/x",  # case-insensitive file systems
    ],
)
def test_a_file_path_is_resolved_and_normalised_before_it_is_checked(file_path: str) -> None:
    assert touches("Write", {"file_path": file_path, "content": ""}) is not None


@pytest.mark.parametrize(
    "file_path",
    [
        "/home/u/proj/.claude/settings.json",
        "/home/u/proj/.claude/settings.local.json",
        ".claude/settings.json",
        "sub/.claude/settings.local.json",
        "/tmp/x/.gemini/settings.json",
        "/tmp/id_rsa",
        "/tmp/id_ed25519",
        "/home/u/proj/certs/server.pem",
        "/home/u/proj/tls.key",
    ],
)
def test_hook_settings_of_any_project_and_private_keys_anywhere_are_caught(
    file_path: str,
) -> None:
    assert touches("Write", {"file_path": file_path}) is not None


@pytest.mark.parametrize(
    "file_path",
    [
        "/home/u/proj/a.py",
        "src/app.py",
        "/home/u/proj/.claude/agents/x.md",
        "/home/u/proj/.gemini/GEMINI.md",
        "/home/u/proj/settings.json",
        "/home/u/proj/keys.py",
        "/home/u/.sshd_notes",
        "/var/lib/agentmail-database/x",
        "/srv/vaulted/x",
        "/tmp/x",
    ],
)
def test_ordinary_files_are_not_protected(file_path: str) -> None:
    assert touches("Write", {"file_path": file_path, "content": "~/.ssh is mentioned"}) is None


def test_a_home_that_cannot_be_resolved_is_refused_rather_than_guessed() -> None:
    assert touches("Write", {"file_path": "~bob/x"}) == "~bob/x"
    assert touches_protected("Write", {"file_path": "~/a.py"}, PROTECTED, CWD) == "~/a.py"


def test_every_path_a_file_tool_names_is_checked() -> None:
    hit = touches("write_file", {"file_path": "/tmp/ok", "path": "/home/u/.ssh/x"})
    assert hit == "/home/u/.ssh"


def test_a_file_tool_without_a_known_path_key_has_all_its_strings_scanned() -> None:
    assert touches("Write", {"filepath": "/home/u/.ssh/x"}) == "/home/u/.ssh"


# --- shell tools -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "sqlite3 /var/lib/agentmail-data/agentmail.db 'delete from grants'",
        "rm -rf ./agentmail-data",
        "rm -rf ~/.config/agentmail",
        "rm -rf $HOME/.config/agentmail",
        "rm -rf ${HOME}/.config/agentmail",
        "cd && rm -rf .config/agentmail",
        "echo ssh-ed25519 AAA >> ~/.ssh/authorized_keys",
        "cd; cat .ssh/id_rsa",
        "rm -rf ~/.ssh",
        "gpg --homedir ~/.gnupg --delete-key x",
        "systemctl --user edit agentmail; vi ~/.config/systemd/user/agentmail.service",
        "sudo tee /etc/systemd/system/agentmail.service",
        "jq 'del(.hooks)' .claude/settings.json > t && mv t .claude/settings.json",
        "sed -i d /home/u/.claude/settings.local.json",
        "echo {} > ~/.gemini/settings.json",
        "echo {} > .gemini/settings.json",
        f"pip install --target {PKG} evil",
        "echo x > /home/u/'.claude'/settings.json",
        'echo x > "/home/u/.ssh"/authorized_keys',
        "echo x > /home/u//.ssh/authorized_keys",
        "echo x > /home/u/./.ssh/authorized_keys",
        "cp x /SRV/VAULT/y",
    ],
)
def test_a_shell_command_mentioning_a_protected_path_is_caught(command: str) -> None:
    for tool in ("Bash", "PowerShell", "run_shell_command"):
        assert touches(tool, {"command": command}) is not None


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "git status",
        "pytest -q",
        "rm -rf build/",
        "ssh user@example.com uptime",
        "cat /home/u/proj/README.md",
        "echo agentmail",
    ],
)
def test_an_ordinary_shell_command_is_not_caught(command: str) -> None:
    assert touches("Bash", {"command": command}) is None


def test_a_protected_path_below_the_cwd_is_also_caught_in_its_relative_form() -> None:
    protected = protected_paths(
        None, [], home=HOME, env={}, package_dir="/work/main/src/mailui4agents"
    )
    command = "sed -i s/deny/allow/ src/mailui4agents/domain/policy.py"
    hit = touches_protected("Bash", {"command": command}, protected, "/work/main", home=HOME)
    assert hit == "/work/main/src/mailui4agents"
    assert touches_protected("Bash", {"command": command}, protected, "/tmp", home=HOME) is None


def test_a_shell_command_run_inside_a_protected_directory_is_caught_whatever_it_says() -> None:
    assert touches("Bash", {"command": "rm -rf *"}, cwd="/var/lib/agentmail-data") == DATA
    assert touches("Bash", {"command": "ls"}, cwd="/home/u/.ssh") == "/home/u/.ssh"


def test_without_a_home_the_tilde_spellings_are_still_caught_by_name() -> None:
    for command in ("rm -rf ~/.ssh", "cat ~/.gnupg/x", "vi ~/.claude/settings.json"):
        assert touches_protected("Bash", {"command": command}, PROTECTED, CWD) is not None


# --- other tools -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool", ["Read", "Grep", "Glob", "WebFetch", "read_file", "mcp__agentmail__send_mail"]
)
def test_read_and_mail_tools_never_touch_anything(tool: str) -> None:
    tool_input = {"file_path": "/home/u/.ssh/id_rsa", "command": "rm -rf ~/.ssh"}
    assert touches(tool, tool_input) is None


def test_an_unknown_guarded_tool_has_every_string_in_its_input_scanned() -> None:
    tool_input = {"args": {"targets": ["/tmp/a", "/etc/systemd/system/x.service"]}}
    assert touches("mcp__fs__write", tool_input) == "/etc/systemd"
    assert touches("mcp__fs__write", {"args": {"targets": ["/tmp/a"]}}) is None
    assert touches("save_memory", {"fact": "my key is in ~/.ssh/id_rsa"}) is not None


def test_odd_input_does_not_break_the_check() -> None:
    assert touches("Bash", {"command": None}) is None
    assert touches("Write", {"file_path": 7}) is None
    nested: dict[str, object] = {}
    level = nested
    for _ in range(200):
        child: dict[str, object] = {}
        level["x"] = child
        level = child
    assert touches("mcp__x__y", nested) is None


@given(
    name=st.sampled_from(PROTECTED),
    parts=st.lists(st.text(alphabet="abc_-", min_size=1, max_size=5), max_size=4),
)
def test_any_file_below_any_protected_path_is_caught(name: str, parts: list[str]) -> None:
    path = "/".join([name, *parts])
    assert touches("Write", {"file_path": path}) is not None
    assert touches("Bash", {"command": f"touch {path}"}) is not None
