"""Codex ``PreToolUse`` hook (``agentmail hook codex``), checked with Codex 0.171.0.

stdin is Claude-shaped: ``{session_id, turn_id, transcript_path, cwd,
hook_event_name: "PreToolUse", model, permission_mode, tool_name: "Bash" |
"apply_patch" | "mcp__SERVER__TOOL", tool_input: {command, ...}, tool_use_id}``.

stdout, exit 0: a deny is Claude's shape, and its reason reaches the model as
``Command blocked by PreToolUse hook: REASON. Command: ...``::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
      "permissionDecision": "deny", "permissionDecisionReason": "..."}}

An allow is ``{}`` ("no objection"): Codex's hook output schema rejects unknown
fields and a rejected output counts as a failed hook, which lets the tool run —
harmless for an allow, but ``{}`` is the one form that is valid in every
version. So a human's note on an *approval* does not reach the model (Codex
has no field for it); a note on a deny always does. ``ask`` (interactive only:
no mail session applies) is ``{}`` too, so Codex's own approval policy decides.

Codex runs the hook only with ``--dangerously-bypass-hook-trust`` (or after a
person trusted it in the TUI), through a shell. A hook that exits 2 blocks the
tool only when it also writes a reason to stderr (checked with 0.171.0: exit 2
with an empty stderr let the command run), so the fail-closed wrapper that
``agentmail install-hook codex`` and the bridge put around the command prints
one (docs/platforms.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "codex"
DEFAULT_TIMEOUT_S = 540.0  # the bridge and install-hook give the hook a 600 s timeout


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    return tool_call(data, session_id=data.get("session_id"), tool_use_id=data.get("tool_use_id"))


def render(decision: HookDecision) -> str:
    if decision.verdict != "deny":
        return "{}"
    output = {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason_text(decision),
    }
    return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False, separators=(",", ":"))


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render)


def _events() -> None:
    """The events other than the tool gate (hooks/events.py): ``Stop`` says
    "waiting for your input" in an interactive session (hooks/idle.py)."""
    from mailui4agents.hooks import idle

    PLATFORM.events = {"Stop": idle.codex_stop(PLATFORM)}


_events()
