"""The generic hook: ``agentmail hook generic`` for any headless agent (docs/bridge.md).

stdin: ``{"tool_name": str, "tool_input": object, "tool_use_id"?: str}``.
stdout: ``{"decision": "allow"|"deny", "reason": "..."}``; exit 0 = allow,
2 = deny. It asks exactly like the platform hooks, in ``AGENTMAIL_SESSION_ID``;
the reason carries the human's note. There is no local prompt to fall back on,
so "ask" is answered as deny.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "generic"
DEFAULT_TIMEOUT_S = 540.0
ASK_AS_DENY = " (no local prompt to ask instead: denied)"
DENY_EXIT = 2


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    return tool_call(data, session_id=None, tool_use_id=data.get("tool_use_id"))


def render(decision: HookDecision) -> str:
    if decision.verdict == "allow":
        body = {"decision": "allow", "reason": reason_text(decision)}
    else:
        suffix = ASK_AS_DENY if decision.verdict == "ask" else ""
        body = {"decision": "deny", "reason": reason_text(decision) + suffix}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def exit_code(decision: HookDecision) -> int:
    return 0 if decision.verdict == "allow" else DENY_EXIT


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render, exit_code)
