"""Platform hooks: ``agentmail hook <platform>`` (docs/behaviour.md#approval-round-trip,
docs/behaviour.md#rules-on-the-waiting-side, docs/behaviour.md#hooks).

An agent platform runs the hook before each tool call. The hook reads the
platform's JSON on stdin, decides with :mod:`mailui4agents.hooks.core` (one flow
for every platform) and prints exactly what that platform accepts. Each platform
module (``claude_code``, ``zcode``, ``gemini``, ``generic``, ``codex``) only parses and renders.
"""

from __future__ import annotations

from mailui4agents.hooks import claude_code, codex, gemini, generic, pi, zcode
from mailui4agents.hooks.platform import Platform
from mailui4agents.hooks.types import HookDecision, ToolCall

#: Every supported platform by its command name.
PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        claude_code.PLATFORM,
        zcode.PLATFORM,
        gemini.PLATFORM,
        generic.PLATFORM,
        codex.PLATFORM,
        pi.PLATFORM,
    )
}

__all__ = ["PLATFORMS", "HookDecision", "Platform", "ToolCall"]
