"""CLI behaviour that needs no gateway."""

from __future__ import annotations

import io
import json
import stat
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mailui4agents.cli.auth import save_login
from mailui4agents.cli.mail import resolve_body
from mailui4agents.cli.main import main
from mailui4agents.cli.output import event_json, event_line, mail_line
from mailui4agents.client import Event, MailOut
from mailui4agents.client.config import ClientConfig, config_path

CLOSED_PORT_URL = "http://127.0.0.1:1"  # nothing listens on port 1: connection refused


def all_command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, loading lazily registered commands the way click does."""
    paths = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            paths.extend(all_command_paths(command, (*prefix, name)))
        else:
            paths.append((*prefix, name))
    return paths


COMMANDS = all_command_paths(main)


def test_the_client_commands_are_all_registered() -> None:
    for path in [("user", "add"), ("agent", "add"), ("login",), ("send",), ("inbox",)]:
        assert path in COMMANDS
    for path in [("read",), ("thread",), ("watch",)]:
        assert path in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "agentmail")
def test_every_command_prints_its_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_a_missing_required_option_is_a_usage_error_with_exit_status_2() -> None:
    result = CliRunner().invoke(main, ["send", "--subject", "s", "--body", "b"])
    assert result.exit_code == 2
    assert "--to" in result.stderr


def test_a_command_without_any_credential_says_how_to_log_in() -> None:
    result = CliRunner().invoke(main, ["inbox"])
    assert result.exit_code == 1
    assert "agentmail login" in result.stderr


def test_an_unreachable_gateway_is_one_line_on_stderr_and_exit_status_1() -> None:
    env = {"AGENTMAIL_URL": CLOSED_PORT_URL, "AGENTMAIL_TOKEN": "am_user_x"}
    result = CliRunner().invoke(main, ["inbox"], env=env)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot reach the gateway at http://127.0.0.1:1")
    assert "Traceback" not in result.output


def test_user_add_asks_for_the_password_twice_when_none_is_given() -> None:
    env = {"AGENTMAIL_URL": CLOSED_PORT_URL, "AGENTMAIL_TOKEN": "am_user_x"}
    result = CliRunner().invoke(main, ["user", "add", "ana"], env=env, input="pw\npw\n")
    assert "Password for ana:" in result.stderr
    assert "Repeat for confirmation:" in result.stderr
    assert result.exit_code == 1  # then the (absent) gateway refuses


def test_user_add_takes_the_password_from_the_environment_without_asking() -> None:
    env = {
        "AGENTMAIL_URL": CLOSED_PORT_URL,
        "AGENTMAIL_TOKEN": "am_user_x",
        "AGENTMAIL_NEW_PASSWORD": "pw",
    }
    result = CliRunner().invoke(main, ["user", "add", "ana"], env=env)
    assert "Password" not in result.stderr
    assert "cannot reach the gateway" in result.stderr


def test_a_login_is_stored_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = save_login("http://gw:8025", "ana", "am_user_t", tmp_path / "am" / "config.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "url": "http://gw:8025",
        "username": "ana",
        "token": "am_user_t",
    }


def test_a_login_drops_a_stored_agent_key_that_would_win_over_the_token(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"key": "am_agent_old", "agent_name": "claude", "extra": 1}))
    save_login("http://gw:8025", "ana", "am_user_t", path)
    config = ClientConfig.load(env={}, path=path)
    assert (config.key, config.token) == (None, "am_user_t")
    assert json.loads(path.read_text())["extra"] == 1


def test_login_uses_the_default_config_location(clean_env: Path) -> None:
    path = save_login("http://gw:8025", "ana", "am_user_t")
    assert path == config_path() == clean_env / "xdg" / "agentmail" / "config.json"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_body_option_wins_and_stdin_is_left_alone() -> None:
    assert resolve_body("from option", None, io.StringIO("from stdin")) == "from option"


def test_an_empty_body_option_is_still_a_body() -> None:
    assert resolve_body("", None, FakeTerminal()) == ""


def test_a_body_file_is_read_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "body.md"
    path.write_text("straße\nline 2\n", encoding="utf-8")
    assert resolve_body(None, str(path), FakeTerminal()) == "straße\nline 2\n"


def test_a_dash_body_file_and_a_piped_stdin_both_read_stdin() -> None:
    assert resolve_body(None, "-", io.StringIO("piped")) == "piped"
    assert resolve_body(None, None, io.StringIO("piped")) == "piped"


def test_no_body_on_an_interactive_terminal_is_a_usage_error_not_a_hang() -> None:
    with pytest.raises(click.UsageError, match="no body"):
        resolve_body(None, None, FakeTerminal())


def test_body_and_body_file_together_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(click.UsageError, match="not both"):
        resolve_body("b", str(tmp_path / "f"), io.StringIO())


def test_send_reads_the_body_from_stdin_before_contacting_the_gateway() -> None:
    env = {"AGENTMAIL_URL": CLOSED_PORT_URL, "AGENTMAIL_TOKEN": "am_user_x"}
    args = ["send", "--to", "claude@/srv.new", "--subject", "s", "--body", "b", "--body-file", "-"]
    result = CliRunner().invoke(main, args, env=env, input="x")
    assert result.exit_code == 2
    assert "not both" in result.stderr


def test_a_new_mail_event_is_one_readable_line() -> None:
    data = {"from": "ana@/srv.fix", "to": ["claude@/srv.fix"], "subject": "two\nlines"}
    event = Event(id=12, type="new_mail", data=data)
    assert event_line(event) == "#12 new_mail  ana@/srv.fix → claude@/srv.fix: two lines"
    assert json.loads(event_json(event)) == {"id": 12, "type": "new_mail", "data": data}


def test_an_unknown_event_type_prints_its_data_as_compact_json() -> None:
    event = Event(id=None, type="calendar", data={"at": "noon"})
    assert event_line(event) == '#- calendar  {"at":"noon"}'


def test_an_unread_mail_is_marked_in_the_inbox_listing() -> None:
    mail = MailOut.model_validate(
        {
            "id": "m1",
            "session_id": "s1",
            "type": "message",
            "from": "ana@.",
            "to": ["claude@."],
            "subject": "hi",
            "created_at": datetime(2025, 1, 2, 3, 4, tzinfo=UTC),
        }
    )
    assert mail_line(mail) == "* m1  2025-01-02 03:04  ana@.  hi"


def test_a_hook_loads_neither_other_commands_nor_the_http_client() -> None:
    """A hook runs once per tool call: a read tool must be decided without importing
    httpx, and a broken import in another command cannot make it crash (exit 1
    lets the tool run)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from mailui4agents.cli.main import main\n"
        "try:\n"
        "    main(['hook', 'claude-code'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in ('httpx', 'mailui4agents.cli.approvals', 'mailui4agents.cli.mail',"
        " 'mailui4agents.client.client') if m in sys.modules]\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    stdin = json.dumps(
        {
            "session_id": "s",
            "cwd": "/tmp",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "/tmp/x"},
            "tool_use_id": "t",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=60
    )
    assert '"permissionDecision":"allow"' in result.stdout, result.stderr
    assert "LOADED []" in result.stderr, result.stderr
