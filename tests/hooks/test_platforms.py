"""Parsing each platform's stdin and rendering exactly what it accepts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from mailui4agents.client.config_file import Coordinates
from mailui4agents.hooks import PLATFORMS, claude_code, gemini, zcode
from mailui4agents.hooks.core import evaluate, relay_key
from mailui4agents.hooks.platform import MAX_REASON_CHARS, HookInputError
from mailui4agents.hooks.runner import answer
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, hook_timeout
from tests.hooks.harness import claude_input, gemini_input, zcode_input

ALLOW, DENY, ASK = (HookDecision(v, f"because {v}") for v in ("allow", "deny", "ask"))


def test_claude_code_renders_its_hook_specific_output() -> None:
    for decision in (ALLOW, DENY, ASK):
        out = json.loads(claude_code.render(decision))
        assert out == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision.verdict,
                "permissionDecisionReason": decision.reason,
            }
        }


def test_claude_code_passes_an_approvals_note_to_the_model() -> None:
    noted = HookDecision("allow", "approved by ana: staging only", "staging only")
    inner = json.loads(claude_code.render(noted))["hookSpecificOutput"]
    assert inner["additionalContext"] == "approved by ana: staging only"
    # A deny's reason already reaches the model; no extra key there.
    denied = HookDecision("deny", "denied by ana: no", "no")
    assert "additionalContext" not in json.loads(claude_code.render(denied))["hookSpecificOutput"]


def test_zcode_renders_exactly_its_two_shapes_and_nothing_for_ask() -> None:
    assert zcode.render(ALLOW) == '{"decision":"approve"}'
    assert json.loads(zcode.render(DENY)) == {"decision": "block", "reason": "because deny"}
    assert zcode.render(ASK) == ""


def test_gemini_renders_allow_explicitly_and_ask_as_deny() -> None:
    assert json.loads(gemini.render(ALLOW)) == {"decision": "allow", "reason": "because allow"}
    assert json.loads(gemini.render(DENY)) == {"decision": "deny", "reason": "because deny"}
    asked = json.loads(gemini.render(ASK))
    assert asked["decision"] == "deny" and asked["reason"].startswith("because ask")


def test_long_reasons_are_bounded() -> None:
    long = HookDecision("deny", "x" * 50_000)
    for platform in PLATFORMS.values():
        assert len(platform.render(long)) < MAX_REASON_CHARS + 200


def test_parsing_takes_the_fields_each_platform_sends() -> None:
    cc = claude_input(session_id="s1", tool_use_id="toolu_1")
    call = claude_code.parse(json.dumps(cc), {})
    assert call == ToolCall("Bash", cc["tool_input"], "s1", "/srv/shop", "toolu_1")
    z = zcode.parse(json.dumps(zcode_input()), {"ZCODE_SESSION_ID": "zs"})
    assert z.session_id == "zs" and z.tool_use_id is None
    g = gemini.parse(json.dumps(gemini_input(session_id="g1")), {})
    assert g.session_id == "g1" and g.tool_name == "run_shell_command" and g.tool_use_id is None


@pytest.mark.parametrize(
    "text", ["", "nope", "[]", "{}", '{"tool_name": ""}', '{"tool_name": "X", "tool_input": []}']
)
def test_bad_input_is_refused(text: str) -> None:
    with pytest.raises(HookInputError):
        claude_code.parse(text, {})


def test_bad_input_denies_through_the_runner() -> None:
    out = json.loads(answer(PLATFORMS["claude-code"], b"\xff\xfe", {}))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_missing_cwd_is_the_hooks_own() -> None:
    call = claude_code.parse('{"tool_name": "Bash", "tool_input": {}}', {})
    assert call.cwd == os.getcwd()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 50.0), ("", 50.0), ("2", 2.0), ("0.5", 0.5), ("0", 50.0), ("-3", 50.0),
     ("nan", 50.0), ("inf", 50.0), ("soon", 50.0), ("1e9", 86400.0)],
)  # fmt: skip
def test_hook_timeout_falls_back_to_the_platform_default(raw: str | None, expected: float) -> None:
    assert hook_timeout(raw, 50.0) == expected


def test_platform_defaults_are_below_their_hook_timeouts() -> None:
    assert PLATFORMS["claude-code"].default_timeout_s == 540  # Claude Code: 600 s
    assert PLATFORMS["gemini"].default_timeout_s == 50  # Gemini CLI: 60 s
    assert PLATFORMS["zcode"].default_timeout_s == 50  # unknown: stay short


def test_relay_keys_are_per_tool_call_and_fit_the_limit() -> None:
    assert relay_key("claude-code", "s", "toolu_1") == "hook:claude-code:s:toolu_1"
    assert relay_key("claude-code", "s", "toolu_1") != relay_key("claude-code", "s", "toolu_2")
    assert relay_key("gemini", "s", None) != relay_key("gemini", "s", None)
    long = relay_key("claude-code", "s" * 300, "t" * 5000)
    assert len(long.encode()) <= 160
    assert long != relay_key("claude-code", "s" * 300, "t" * 4999 + "u")


def settings(tmp_path: Path, **env: str) -> HookSettings:
    call = ToolCall("Bash", {}, "s", str(tmp_path), None)
    home = tmp_path / "home"
    full_env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **env}
    return HookSettings.from_env("claude-code", 5.0, call, full_env)


def test_the_data_dir_defaults_to_agentmail_data_in_the_cwd(tmp_path: Path) -> None:
    assert settings(tmp_path).data_dir == str(tmp_path / "agentmail-data")
    custom = settings(tmp_path, AGENTMAIL_DATA_DIR="/var/lib/agentmail")
    assert custom.data_dir == "/var/lib/agentmail"


def test_without_an_agent_key_a_guarded_call_is_denied(tmp_path: Path) -> None:
    s = settings(tmp_path, AGENTMAIL_SESSION_ID="sess", AGENTMAIL_TOKEN="am_user_x")
    assert not s.coordinates.is_agent
    call = ToolCall("Bash", {"command": "ls"}, "s", str(tmp_path), None)
    decided = anyio.run(evaluate, call, s)
    assert decided.verdict == "deny" and "AGENTMAIL_KEY" in decided.reason
    # Negative control: a read tool needs no key at all.
    read = ToolCall("Read", {"file_path": "x"}, "s", str(tmp_path), None)
    assert anyio.run(evaluate, read, s).verdict == "allow"


def test_a_protected_path_is_refused_even_without_any_gateway(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert s.coordinates == Coordinates(s.coordinates.url, None, None, None)  # no credentials
    ssh = ToolCall("Bash", {"command": "cat >> ~/.ssh/authorized_keys"}, "s", str(tmp_path), None)
    decided = anyio.run(evaluate, ssh, s)
    assert decided.verdict == "deny" and "protected" in decided.reason
    plain = ToolCall("Bash", {"command": "ls"}, "s", str(tmp_path), None)
    assert anyio.run(evaluate, plain, s).verdict == "ask"  # no session: platform prompt
