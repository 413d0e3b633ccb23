"""Runner adapters, one module per agent CLI (see :mod:`.base` for the interface)."""

from __future__ import annotations

from mailui4agents.bridge.runners.base import Runner

#: The --runner values this bridge knows.
KINDS = ("claude-code", "codex", "gemini", "opencode", "pi", "zcode", "dsh", "acp", "command")


def make_runner(kind: str, command: list[str], options: dict[str, str]) -> Runner:
    """The runner for ``--runner KIND`` (``command``: the program after ``--``)."""
    if kind == "command":
        from mailui4agents.bridge.runners.command import CommandRunner

        return CommandRunner(command, options)
    if kind == "acp":
        from mailui4agents.bridge.runners.acp import AcpRunner

        return AcpRunner(command, options)
    if command:
        raise ValueError(f"the {kind} runner takes no command after --")
    if kind == "claude-code":
        from mailui4agents.bridge.runners.claude_code import ClaudeCodeRunner

        return ClaudeCodeRunner(options)
    if kind == "codex":
        from mailui4agents.bridge.runners.codex import CodexRunner

        return CodexRunner(options)
    if kind == "gemini":
        from mailui4agents.bridge.runners.gemini import GeminiRunner

        return GeminiRunner(options)
    if kind == "pi":
        from mailui4agents.bridge.runners.pi import PiRunner

        return PiRunner(options)
    if kind == "opencode":
        from mailui4agents.bridge.runners.opencode import OpencodeRunner

        return OpencodeRunner(options)
    if kind == "dsh":
        from mailui4agents.bridge.runners.dsh import DshRunner

        return DshRunner(options)
    if kind == "zcode":
        from mailui4agents.bridge.runners.zcode import ZcodeRunner

        return ZcodeRunner(options)
    raise ValueError(f"unknown runner {kind!r}; known: {', '.join(KINDS)}")
