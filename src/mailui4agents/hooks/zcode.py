"""ZCode hook (docs/api.md#hook-contracts).

stdin: ``{hook_event_name, tool_name, tool_input, session_id, permission_mode,
...}``; the session id may also come from ``ZCODE_SESSION_ID``. stdout must be
exactly ``{"decision":"approve"}`` or ``{"decision":"block","reason":"..."}``:
any extra key fails ZCode's schema check, and empty output means "no opinion"
(ZCode's own prompt decides) — which is how ``ask`` is rendered, and why an
allow (``full`` mode included) is always printed explicitly.

ZCode's hook timeout is not documented, so the hook waits at most
AGENTMAIL_HOOK_TIMEOUT (default 50 s); give the hook a longer timeout than that
in ZCode's settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "zcode"
DEFAULT_TIMEOUT_S = 50.0


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    session = data.get("session_id") or env.get("ZCODE_SESSION_ID")
    return tool_call(data, session_id=session, tool_use_id=data.get("tool_use_id"))


def render(decision: HookDecision) -> str:
    if decision.verdict == "allow":
        return json.dumps({"decision": "approve"}, separators=(",", ":"))
    if decision.verdict == "ask":
        return ""
    body = {"decision": "block", "reason": reason_text(decision)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render)
