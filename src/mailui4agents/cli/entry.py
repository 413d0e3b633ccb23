"""The ``agentmail`` console script: ``agentmail hook <platform>`` without click.

A coding agent runs its pre-tool hook on every guarded tool call, hundreds of
times a task, so the hook's start-up is paid each time. This module imports
only ``sys`` and ``os``; a hook call goes straight to
:func:`mailui4agents.hooks.runner.run_and_exit`, which loads the standard
library only until a human must be asked (mailui4agents/hooks/core.py). Every
other command, and ``hook --help``, goes through click (mailui4agents/cli/main.py).
"""

from __future__ import annotations

import sys

from mailui4agents.cli.fast_hook import hook_fast_path


def main() -> None:
    hook_fast_path(sys.argv[1:])
    from mailui4agents.cli.main import main as cli

    cli()
