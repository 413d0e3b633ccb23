"""pi hook: ``agentmail hook pi``, called by the agentmail extension for pi
(``bridge/runners/assets/pi-agentmail.ts``; docs/platforms.md, "pi").

pi has no hook command of its own: the extension's ``tool_call`` handler runs
this hook with ``{tool_name, tool_input, tool_use_id, session_id, cwd}`` on stdin
and blocks the tool unless the answer is ``{"decision":"allow"}``. The answer is
``{"decision":"allow"|"deny"|"ask","reason":"..."}``, always exit 0; "ask" (no
mail session and no owner) lets the person at pi's own prompt decide, and the
extension blocks when there is no prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "pi"
DEFAULT_TIMEOUT_S = 540.0


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    return tool_call(data, session_id=data.get("session_id"), tool_use_id=data.get("tool_use_id"))


def render(decision: HookDecision) -> str:
    body = {"decision": decision.verdict, "reason": reason_text(decision)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render)
