"""``agentmail hook <platform>`` answered before click loads (mailui4agents/cli/entry.py
and ``python -m mailui4agents.cli.main`` both call it). Imports only ``sys`` and ``os``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

#: `agentmail hook NAME` for these names takes the fast path; equal to
#: mailui4agents.hooks.PLATFORMS (tests/hooks/test_fast_path.py checks it).
HOOK_PLATFORMS = frozenset({"claude-code", "codex", "zcode", "gemini", "generic", "pi"})

BLOCKING_EXIT = 2  # blocks the tool in every supported platform (cli/hook.py)


def hook_fast_path(args: Sequence[str]) -> None:
    """Answer the hook and exit when `args` is exactly ``hook <platform>``;
    return (doing nothing) for anything else."""
    if len(args) != 2 or args[0] != "hook" or args[1] not in HOOK_PLATFORMS:
        return
    try:
        from mailui4agents.hooks.runner import run_and_exit
    except BaseException as exc:  # a broken install must block, not exit 1 ("proceed")
        sys.stderr.write(f"agentmail hook {args[1]} failed: {exc!r}; blocking\n")
        sys.stderr.flush()
        os._exit(BLOCKING_EXIT)
    run_and_exit(args[1])
