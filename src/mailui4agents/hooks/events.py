"""Hook events other than the tool gate, on the same ``agentmail hook NAME``
command (docs/platforms.md, "Interactive sessions").

Claude Code and Codex name the event in their stdin (``hook_event_name``), so
one command serves every event a platform sends: ``PreToolUse`` is the tool
gate (hooks/core.py); ``PermissionRequest`` races the terminal's own dialog
(hooks/race.py); ``PostToolUse`` tells the gateway the terminal answered
first; ``Notification`` and ``Stop`` say "waiting for you" (hooks/idle.py)
and hand the running agent mail that arrived for it (hooks/mail_in.py).

Every handler here is best effort on the agent's side: an event that is not a
permission decision never blocks the agent because the gateway failed, and a
handler that raises prints nothing (the platform goes on as without the hook),
except ``PermissionRequest``, whose failure leaves the terminal's dialog to
decide (also printing nothing).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from mailui4agents.hooks.platform import HookInputError, Platform, load_object
from mailui4agents.hooks.types import HookSettings, ToolCall

#: Printed when an event handler has nothing to say: the platform goes on.
NOTHING: tuple[str, int] = ("", 0)

#: The event that is the tool gate itself (hooks/core.py) on every platform
#: that names its events.
GATE_EVENTS = frozenset({"PreToolUse", "BeforeTool"})


def event_of(stdin: bytes) -> tuple[str, dict[str, Any]] | None:
    """The event name and parsed input when ``stdin`` names a hook event, else
    None (bad JSON is left to the tool gate's parser, which denies)."""
    if b'"hook_event_name"' not in stdin:
        return None
    try:
        data = load_object(stdin.decode("utf-8"))
    except (HookInputError, UnicodeDecodeError):
        return None
    name = data.get("hook_event_name")
    return (name, data) if isinstance(name, str) else None


def dispatch(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> tuple[str, int] | None:
    """The answer of the platform's handler for the event in ``stdin``, or None
    when it is a tool call for the gate."""
    if not platform.events:
        return None
    found = event_of(stdin)
    if found is None:
        return None
    handler = platform.events.get(found[0])
    if handler is None:
        # An event the settings name but this version has no handler for (an
        # older agentmail under a newer install) says nothing rather than
        # answering it as a tool call, in the wrong shape.
        return None if found[0] in GATE_EVENTS else NOTHING
    try:
        return handler(found[1], env)
    except Exception as exc:  # best effort: never break the agent's turn
        sys.stderr.write(f"agentmail hook {platform.name} {found[0]} failed: {exc!r}\n")
        return NOTHING


def settings_for(
    platform: Platform, data: Mapping[str, Any], env: Mapping[str, str]
) -> HookSettings:
    """The hook settings for an event's input (its ``cwd`` and ``session_id``).
    Raises OSError or ValueError for an unreadable config file."""
    call = event_call(data)
    return HookSettings.from_env(platform.name, platform.default_timeout_s, call, env)


def event_call(data: Mapping[str, Any]) -> ToolCall:
    """An event's input as a ToolCall (an empty one when it names no tool)."""
    name = data.get("tool_name")
    tool_input = data.get("tool_input")
    cwd = data.get("cwd")
    session = data.get("session_id")
    use_id = data.get("tool_use_id")
    return ToolCall(
        tool_name=name if isinstance(name, str) else "",
        tool_input=tool_input if isinstance(tool_input, dict) else {},
        session_id=session if isinstance(session, str) and session else None,
        cwd=cwd if isinstance(cwd, str) and cwd else os.getcwd(),
        tool_use_id=use_id if isinstance(use_id, str) and use_id else None,
    )


def bound_session(settings: HookSettings, call: ToolCall, until: float) -> str | None:
    """The mail session of this interactive platform session (bound on first
    use, owned by :attr:`HookSettings.owner`), or of the bridge's turn; None when
    there is no owner or no platform session id."""
    from mailui4agents.hooks.gateway import connect, mail_session

    return mail_session(connect(settings), call, settings, until)
