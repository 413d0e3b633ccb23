"""Gemini CLI ``BeforeTool`` hook (docs/api.md#hook-contracts).

stdin: ``{session_id, transcript_path, cwd, hook_event_name, timestamp,
tool_name, tool_input, mcp_context?, original_request_name?}`` — there is no
tool-call id, so each call gets a random relay key. stdout:
``{"decision":"allow","reason":"..."}`` allows (explicitly; Gemini's hook
aggregator treats it exactly like ``{}``) and ``{"decision":"deny","reason":"..."}``
denies; the reason reaches the model as the tool's error.

``ask`` is rendered as a deny. In headless runs (``gemini -p``) a hook "ask"
becomes ASK_USER, which Gemini treats as deny anyway; and in some Gemini
versions the aggregator merges a non-blocking "ask" into "allow", so printing
it could let the call run unasked.

Gemini's default hook timeout is 60 s and a killed hook probably fails open, so
the hook waits at most AGENTMAIL_HOOK_TIMEOUT (default 50 s). For longer human
waits raise both, the hook's ``timeout`` (milliseconds) above it::

    {"hooks": {"BeforeTool": [{"matcher": "*", "hooks": [{"name": "agentmail",
      "type": "command", "command": "agentmail hook gemini", "timeout": 600000}]}]}}
    # with AGENTMAIL_HOOK_TIMEOUT=540 in the environment
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mailui4agents.hooks.platform import Platform, load_object, reason_text, tool_call
from mailui4agents.hooks.types import HookDecision, ToolCall

NAME = "gemini"
DEFAULT_TIMEOUT_S = 50.0  # Gemini's default hook timeout is 60 s
ASK_AS_DENY = " (Gemini CLI: a hook cannot safely hand this to a local prompt, so: denied)"


def parse(text: str, env: Mapping[str, str]) -> ToolCall:
    data = load_object(text)
    return tool_call(data, session_id=data.get("session_id"), tool_use_id=None)


def render(decision: HookDecision) -> str:
    if decision.verdict == "allow":
        body = {"decision": "allow", "reason": reason_text(decision)}
    elif decision.verdict == "ask":
        body = {"decision": "deny", "reason": reason_text(decision) + ASK_AS_DENY}
    else:
        body = {"decision": "deny", "reason": reason_text(decision)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


PLATFORM = Platform(NAME, DEFAULT_TIMEOUT_S, parse, render)
