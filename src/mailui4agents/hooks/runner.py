"""Stdin in, the platform's answer out: the part of a hook run that is I/O glue."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NoReturn

from mailui4agents.hooks.core import decide
from mailui4agents.hooks.platform import HookInputError, Platform
from mailui4agents.hooks.types import HookDecision, HookSettings, deny


def answer(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> str:
    """The text to print for one hook call; never raises for bad input or a
    failing gateway (both deny)."""
    return answer_and_exit(platform, stdin, env)[0]


def answer_and_exit(platform: Platform, stdin: bytes, env: Mapping[str, str]) -> tuple[str, int]:
    """The text to print and the exit status for one hook call."""
    from mailui4agents.hooks.events import dispatch

    handled = dispatch(platform, stdin, env)
    if handled is not None:
        return handled
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


BLOCKING_EXIT = 2  # printing failed: block the tool with the exit code (cli/hook.py)


def emit(platform: Platform) -> int:
    """Read stdin, print the platform's answer, flush: the exit status to use.
    Raises only if reading or printing fails (the caller blocks)."""
    text, status = answer_and_exit(platform, sys.stdin.buffer.read(), os.environ)
    if text:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return status


def run_and_exit(name: str) -> NoReturn:
    """`agentmail hook NAME` (mailui4agents/cli/entry.py): answer and exit at once.

    `os._exit` after the flush: the platform waits for our exit, and tearing
    down the interpreter's modules costs more than the decision itself. Any
    failure, even a bad platform name, exits BLOCKING_EXIT, never 1.
    """
    try:
        from mailui4agents.hooks import PLATFORMS

        status = emit(PLATFORMS[name])
    except BaseException as exc:
        try:
            sys.stderr.write(f"agentmail hook {name} failed: {exc!r}; blocking\n")
            sys.stderr.flush()
        finally:
            os._exit(BLOCKING_EXIT)
    os._exit(status)
