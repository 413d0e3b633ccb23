"""What a platform adapter provides, and the stdin parsing they share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from mailui4agents.hooks.types import HookDecision, ToolCall

# Claude Code caps hook output at 10,000 characters; a reason far shorter than
# that still carries any human's note in full.
MAX_REASON_CHARS = 2000


class HookInputError(ValueError):
    """The platform's stdin is not the JSON the hook expects."""


def _always_zero(_decision: HookDecision) -> int:
    return 0


#: A handler for one hook event other than the tool gate (``PermissionRequest``,
#: ``Notification``, ``Stop``, ...): the parsed stdin and the environment in, the
#: text to print and the exit status out, or None to leave the input to the
#: tool gate (mailui4agents/hooks/events.py).
EventHandler = Callable[[dict[str, Any], Mapping[str, str]], "tuple[str, int] | None"]


class Platform:
    """One agent platform: how to read its hook input and answer it.

    ``default_timeout_s`` is the hook's own wait deadline when
    AGENTMAIL_HOOK_TIMEOUT is not set: below the platform's hook timeout, since
    several platforms fail *open* when they kill a hook that is still waiting.
    A plain class (not a dataclass): it is on the hook's fast path
    (mailui4agents/hooks/types.py says why).
    """

    __slots__ = ("default_timeout_s", "events", "exit_code", "name", "parse", "render")

    def __init__(
        self,
        name: str,
        default_timeout_s: float,
        parse: Callable[[str, Mapping[str, str]], ToolCall],
        render: Callable[[HookDecision], str],
        exit_code: Callable[[HookDecision], int] = _always_zero,
        events: Mapping[str, EventHandler] | None = None,
    ) -> None:
        self.name = name
        self.default_timeout_s = default_timeout_s
        self.parse = parse
        self.render = render
        #: The exit status for a decision (platforms that read it, like the generic hook).
        self.exit_code = exit_code
        #: Handlers by ``hook_event_name`` for the events that are not the tool
        #: gate; an input naming none of them is a tool call (``parse``).
        self.events: Mapping[str, EventHandler] = events or {}

    def __repr__(self) -> str:
        return f"Platform({self.name!r})"


def load_object(text: str) -> dict[str, Any]:
    """The stdin text as a JSON object."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookInputError(f"hook input is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise HookInputError(f"hook input is a JSON {type(data).__name__}, not an object")
    return data


def tool_call(data: Mapping[str, Any], *, session_id: Any, tool_use_id: Any) -> ToolCall:
    """The fields every platform has: ``tool_name``, ``tool_input``, ``cwd``."""
    name = data.get("tool_name")
    if not isinstance(name, str) or not name:
        raise HookInputError("hook input has no tool_name")
    tool_input = data.get("tool_input", {})
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise HookInputError(f"tool_input is a JSON {type(tool_input).__name__}, not an object")
    cwd = data.get("cwd")
    return ToolCall(
        tool_name=name,
        tool_input=tool_input,
        session_id=_text(session_id),
        # Hooks run in the platform's working directory when the input omits it.
        cwd=cwd if isinstance(cwd, str) and cwd else os.getcwd(),
        tool_use_id=_text(tool_use_id),
    )


def reason_text(decision: HookDecision) -> str:
    """The reason, bounded so the platform never truncates or rejects the output."""
    reason = decision.reason
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return reason


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
