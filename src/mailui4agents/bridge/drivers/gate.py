"""One tool call of a driven agent → the hook flow's decision (fail closed)."""

from __future__ import annotations

import logging
import os
from typing import Any

from mailui4agents.hooks.core import evaluate
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, deny

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 540.0
MAX_VALUE_CHARS = 8000  # a diff in the request is for the human's eyes; keep it bounded


def bounded(value: Any) -> Any:
    """``value`` with every long string cut (nested objects and lists too)."""
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + "…"
    if isinstance(value, dict):
        return {str(k): bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v) for v in value[:200]]
    return value


async def decide(
    platform: str, tool: str, tool_input: dict[str, Any], *, session_id: str | None,
    cwd: str, tool_use_id: str | None,
) -> HookDecision:  # fmt: skip
    """Ask like ``agentmail hook`` would; any unexpected error denies."""
    call = ToolCall(tool, bounded(tool_input), session_id, cwd, tool_use_id)
    try:
        settings = HookSettings.from_env(platform, DEFAULT_TIMEOUT_S, call, os.environ)
        return await evaluate(call, settings)
    except Exception as exc:  # fail closed: only an explicit approval allows
        logger.warning("deciding %s failed: %r", tool, exc)
        return deny(f"the agentmail gate failed ({type(exc).__name__}: {exc}); denied to be safe")
