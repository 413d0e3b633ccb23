"""The ``agentmail`` console script: ``agentmail hook <platform>`` without click.

A coding agent runs its pre-tool hook on every guarded tool call, hundreds of
times a task, so the hook's start-up is paid each time. This module imports
only ``sys`` and ``os``; a hook call goes straight to
:func:`mailui4agents.hooks.runner.run_and_exit`, which loads the standard
library only until a human must be asked (mailui4agents/hooks/core.py). Every
other command, and ``hook --help``, goes through click (mailui4agents/cli/main.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

#: `agentmail hook NAME` for these names takes the fast path; equal to
#: mailui4agents.hooks.PLATFORMS (tests/hooks/test_fast_path.py checks it).
HOOK_PLATFORMS = frozenset({"claude-code", "zcode", "gemini", "generic"})

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


def main() -> None:
    hook_fast_path(sys.argv[1:])
    from mailui4agents.cli.main import main as cli

    cli()
