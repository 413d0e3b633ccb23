"""The pure parts of the Claude Code channel (mcp/channel.py): which command line
names the channel, when mail may be claimed, what a permission_request must hold,
and which decisions are sent back to Claude Code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailui4agents.hooks.types import allow, ask, deny
from mailui4agents.mcp.channel import (
    BadNotification,
    answer_for,
    mail_gate,
    mail_message,
    names_channel,
    parse_permission_request,
    preview_input,
)

CLAUDE = "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe"


@pytest.mark.parametrize(
    "argv",
    [
        [CLAUDE, "--dangerously-load-development-channels", "server:agentmail"],
        [CLAUDE, "--dangerously-load-development-channels", "server:other", "server:agentmail"],
        [CLAUDE, "--dangerously-load-development-channels=server:agentmail"],
        [CLAUDE, "--channels", "plugin:x@y,server:agentmail", "--model", "opus"],
    ],
)
def test_a_command_line_naming_the_server_as_a_channel(argv: list[str]) -> None:
    assert names_channel(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [CLAUDE],
        [CLAUDE, "--dangerously-load-development-channels", "server:agentmail2"],
        [CLAUDE, "--dangerously-load-development-channels", "server:other", "--resume", "x",
         "server:agentmail"],  # after another option: a prompt, not a channel
        [CLAUDE, "--mcp-config", "server:agentmail"],
        [CLAUDE, "server:agentmail"],
    ],
)  # fmt: skip
def test_a_command_line_not_naming_it(argv: list[str]) -> None:
    assert not names_channel(argv)


NAMED = [[CLAUDE, "--dangerously-load-development-channels", "server:agentmail"]]


def home_with(tmp_path: Path, config: object) -> dict[str, str]:
    (tmp_path / ".claude.json").write_text(json.dumps(config))
    return {"HOME": str(tmp_path)}


def test_mail_is_claimed_only_when_claude_code_would_take_channel_messages(
    tmp_path: Path,
) -> None:
    on = home_with(tmp_path, {"cachedGrowthBookFeatures": {"tengu_harbor": True}})
    assert mail_gate(on, NAMED) is None
    assert "not started with" in str(mail_gate(on, [[CLAUDE]]))
    for var in ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"):
        assert "third-party" in str(mail_gate({**on, var: "1"}, NAMED))
    assert mail_gate({**on, "CLAUDE_CODE_USE_BEDROCK": "0"}, NAMED) is None
    for var in ("DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DO_NOT_TRACK"):
        assert "reads no rollout flags" in str(mail_gate({**on, var: "1"}, NAMED))


@pytest.mark.parametrize(
    "config",
    [{}, {"cachedGrowthBookFeatures": {"tengu_harbor": False}},
     {"cachedGrowthBookFeatures": {"tengu_harbor": "true"}}, ["not", "an", "object"]],
)  # fmt: skip
def test_without_the_cached_rollout_flag_no_mail_is_claimed(tmp_path: Path, config: object) -> None:
    assert "tengu_harbor" in str(mail_gate(home_with(tmp_path, config), NAMED))


def test_claude_config_dir_is_where_the_flag_is_read(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    env = home_with(tmp_path / "cfg", {"cachedGrowthBookFeatures": {"tengu_harbor": True}})
    assert mail_gate({"HOME": "/nonexistent", "CLAUDE_CONFIG_DIR": env["HOME"]}, NAMED) is None
    assert mail_gate({"HOME": "/nonexistent"}, NAMED) is not None


def test_a_permission_request_is_checked_field_by_field() -> None:
    good = {"request_id": "abcde", "tool_name": "Bash", "description": "run",
            "input_preview": '{"command": "ls"}'}  # fmt: skip
    assert parse_permission_request(good) == ("abcde", "Bash", "run", '{"command": "ls"}')
    assert parse_permission_request({k: v for k, v in good.items() if k != "description"})[2] == ""
    bad: object
    for bad in (
        None, [], {**good, "request_id": None}, {**good, "request_id": "a b"},
        {**good, "request_id": "x" * 65}, {**good, "tool_name": ""}, {**good, "tool_name": 1},
        {**good, "input_preview": "x" * 4001}, {k: v for k, v in good.items() if k != "tool_name"},
    ):  # fmt: skip
        with pytest.raises(BadNotification):
            parse_permission_request(bad)


def test_the_preview_is_the_input_when_whole_else_kept_as_text() -> None:
    assert preview_input('{"command": "ls"}') == {"command": "ls"}
    assert preview_input('{"command": "ls -la /very/lo…') == {
        "input_preview": '{"command": "ls -la /very/lo…'
    }
    assert preview_input("[1]") == {"input_preview": "[1]"}


def test_only_a_decision_is_sent_back() -> None:
    assert answer_for(allow("approved by ana")) == "allow"
    assert answer_for(deny("denied by ana: no")) == "deny"
    assert answer_for(deny("the mail session is in plan mode (read-only): refused")) == "deny"
    assert answer_for(deny("cancelled by claude (answered in the terminal)")) is None
    assert answer_for(deny("timed out: nobody decided within 20 s")) is None
    assert answer_for(deny("duplicate request: ...")) is None
    assert answer_for(ask("the gateway is unavailable")) is None


def test_a_mail_message_keeps_only_meta_keys_claude_code_accepts() -> None:
    mail = {"id": "m1", "from": "ana@/srv/shop.a1", "subject": "x" * 400, "session_id": "s1",
            "body": "hello", "from_human": True, "type": "message"}  # fmt: skip
    message = mail_message(mail)
    assert set(message["meta"]) == {"from", "mail_id", "subject", "session_id"}
    assert len(message["meta"]["subject"]) == 300
    assert "hello" in message["content"] and "m1" in message["content"]
