"""`agentmail hook codex`: Claude-shaped input, a deny Codex accepts, {} otherwise."""

from __future__ import annotations

import json

from mailui4agents.hooks import PLATFORMS
from mailui4agents.hooks.types import allow, ask, deny

CODEX = PLATFORMS["codex"]
STDIN = {
    "session_id": "01a23148-778b",
    "turn_id": "t",
    "cwd": "/w",
    "hook_event_name": "PreToolUse",
    "model": "m",
    "permission_mode": "bypassPermissions",
    "tool_name": "Bash",
    "tool_input": {"command": "echo hi > marker.txt"},
    "tool_use_id": "call_e68",
}


def test_parses_what_codex_sends() -> None:
    call = CODEX.parse(json.dumps(STDIN), {})
    assert (call.tool_name, call.tool_use_id, call.session_id) == (
        "Bash",
        "call_e68",
        "01a23148-778b",
    )
    assert call.tool_input == {"command": "echo hi > marker.txt"} and call.cwd == "/w"


def test_a_deny_carries_the_note_and_anything_else_is_no_objection() -> None:
    out = json.loads(CODEX.render(deny("denied by ana: use the staging database")))
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "denied by ana: use the staging database",
        }
    }
    # No field Codex's schema might refuse: a refused output counts as a failed hook.
    assert CODEX.render(allow("approved", note="only on staging")) == "{}"
    assert CODEX.render(ask("no mail session")) == "{}"
    assert CODEX.exit_code(deny("x")) == 0
