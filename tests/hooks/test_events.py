"""One `agentmail hook claude-code` command for every event (hooks/events.py),
as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

from mailui4agents.testing import clean_env

STOP = {"session_id": "s1", "cwd": "/srv/shop", "hook_event_name": "Stop",
        "stop_hook_active": False, "last_assistant_message": "DONE"}  # fmt: skip


def hook(payload: Mapping[str, object], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "hook", "claude-code"],
        input=json.dumps(payload), capture_output=True, text=True, timeout=60,
        env=clean_env(AGENTMAIL_URL="http://127.0.0.1:9", AGENTMAIL_KEY="am_agent_x", **env),
    )  # fmt: skip


def test_an_event_without_a_handler_says_nothing_not_a_tool_gate_answer() -> None:
    done = hook({**STOP, "hook_event_name": "SessionEnd"})
    assert (done.returncode, done.stdout) == (0, "")


def test_pre_tool_use_is_still_the_gate_outside_an_interactive_install() -> None:
    call = {"session_id": "s1", "cwd": "/srv/shop", "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}  # fmt: skip
    done = hook(call, AGENTMAIL_OWNER="ana")  # the gateway is down: ask at the terminal
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_interactive_pre_tool_use_leaves_the_dialog_in_charge_but_denies_protected_paths() -> None:
    call = {"session_id": "s1", "cwd": "/srv/shop", "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}  # fmt: skip
    done = hook(call, AGENTMAIL_INTERACTIVE="1")
    assert (done.returncode, done.stdout) == (0, "")
    protected = {**call, "tool_input": {"command": "cat ~/.config/agentmail/config.json"}}
    done = hook(protected, AGENTMAIL_INTERACTIVE="1", HOME="/home/ana")
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "protected" in out["permissionDecisionReason"]


def test_permission_request_with_the_gateway_down_leaves_the_dialog_to_decide() -> None:
    call = {"session_id": "s1", "cwd": "/srv/shop", "hook_event_name": "PermissionRequest",
            "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}  # fmt: skip
    done = hook(call, AGENTMAIL_INTERACTIVE="1", AGENTMAIL_OWNER="ana")
    assert (done.returncode, done.stdout) == (0, "")
