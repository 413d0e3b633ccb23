"""Stdin in, the platform's answer out: the part of a hook run that is I/O glue."""

from __future__ import annotations

from collections.abc import Mapping

from mailui4agents.hooks.core import decide
from mailui4agents.hooks.platform import HookInputError, Platform
from mailui4agents.hooks.types import HookDecision, HookSettings, deny


def answer(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> str:
    """The text to print for one hook call; never raises for bad input or a
    failing gateway (both deny)."""
    return answer_and_exit(platform, stdin, env)[0]


def answer_and_exit(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> tuple[str, int]:
    """The text to print and the exit status for one hook call."""
    decision = decision_for(platform, stdin, env)
    return platform.render(decision), platform.exit_code(decision)


def decision_for(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> HookDecision:
    try:
        call = platform.parse(stdin.decode("utf-8"), env)
    except (HookInputError, UnicodeDecodeError) as exc:
        return deny(f"the agentmail hook could not read {platform.name}'s input: {exc}")
    try:
        settings = HookSettings.from_env(platform.name, platform.default_timeout_s, call, env)
    except (OSError, ValueError) as exc:  # an unreadable agentmail config file
        return deny(f"the agentmail hook could not load its settings: {exc}")
    return decide(call, settings)
