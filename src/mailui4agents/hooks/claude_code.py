"""Claude Code ``PreToolUse`` hook (docs/api.md#hook-contracts).

stdin: ``{session_id, transcript_path, cwd, permission_mode, hook_event_name,
tool_name, tool_input, tool_use_id, ...}``. stdout, exit 0::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
      "permissionDecision": "allow" | "deny" | "ask",
      "permissionDecisionReason": "..."}}

The reason reaches Claude on a deny, so the human's note is in it; on an allow
it is shown to the user only, so an approval with a note also sets
``additionalContext`` (documented for PreToolUse) to pass the note to Claude. Exit 1 does
NOT block in Claude Code, and neither does a hook it kills on timeout (600 s by
default): the call then goes through the normal permission flow. So the hook
waits at most AGENTMAIL_HOOK_TIMEOUT (default 540 s) and always prints an
explicit answer; configure the hook's ``timeout`` above that::

    {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
      "command": "agentmail hook claude-code", "timeout": 600}]}]}}

``ask`` (only in interactive sessions, when the gateway cannot be reached or no
mail session applies) shows Claude Code's own prompt; in ``claude -p`` it ends
as a deny.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "claude-code"
DEFAULT_TIMEOUT_S = 540.0  # Claude Code's default hook timeout is 600 s


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    return tool_call(data, session_id=data.get("session_id"), tool_use_id=data.get("tool_use_id"))


def render(decision: HookDecision) -> str:
    output: dict[str, str] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision.verdict,
        "permissionDecisionReason": reason_text(decision),
    }
    if decision.verdict == "allow" and (decision.note or decision.context):
        # On an allow the reason is shown to the user only; the human's note is
        # for the model too ("yes, but only on staging"), so it goes in its context.
        output["additionalContext"] = reason_text(decision)
    return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False, separators=(",", ":"))


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render)


def _events() -> None:
    """The other events of an interactive install (hooks/events.py, hooks/race.py,
    hooks/idle.py, hooks/mail_in.py)."""
    from mailui4agents.hooks import idle, mail_in, race

    PLATFORM.events = {
        "PreToolUse": race.pre_tool_use(PLATFORM, render),
        "PermissionRequest": race.permission_request(PLATFORM),
        "PostToolUse": race.post_tool_use(PLATFORM),
        "PostToolUseFailure": race.post_tool_use(PLATFORM),
        "Notification": idle.notification(PLATFORM),
        "Stop": mail_in.stop(PLATFORM),
        "UserPromptSubmit": mail_in.prompt(PLATFORM),
    }


_events()
