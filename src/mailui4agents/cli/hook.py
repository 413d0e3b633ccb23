"""``agentmail hook <platform>``: answer an agent platform's tool-permission hook.

Reads the platform's JSON on stdin, prints exactly the JSON that platform
accepts and exits 0 (the generic hook: 2 on a deny). Bad input or any failure
prints a deny. Only if even printing fails does it exit 2, which blocks the
tool in every supported platform — a plain crash (exit 1) would let Claude
Code run the tool.
"""

from __future__ import annotations

import gc
import sys

import click

from mailui4agents.hooks import PLATFORMS, Platform
from mailui4agents.hooks.runner import BLOCKING_EXIT, emit

# `agentmail hook NAME` itself skips click (mailui4agents/cli/entry.py); this
# group serves `--help` and callers that invoke it through click.


@click.group("hook")
def hook() -> None:
    """Ask a human by mail before an agent runs a guarded tool.

    Configure it as the platform's pre-tool hook. Environment: AGENTMAIL_URL,
    AGENTMAIL_KEY (the agent's key), AGENTMAIL_SESSION_ID (set by the bridge)
    or AGENTMAIL_OWNER (the person asked in an interactive session), and
    AGENTMAIL_HOOK_TIMEOUT (seconds to wait; keep the platform's own hook
    timeout above it, since platforms let the tool run when they kill a hook).
    """


def _run(platform: Platform) -> None:
    try:
        status = emit(platform)
        # The platform waits for our exit, and tearing down every imported module
        # is a large part of each tool call's cost (bench/hook.py); frozen objects
        # are skipped by that final sweep.
        gc.freeze()
    except BaseException as exc:  # printing failed: block with the exit code instead
        sys.stderr.write(f"agentmail hook {platform.name} failed: {exc!r}; blocking\n")
        raise SystemExit(BLOCKING_EXIT) from None
    raise SystemExit(status)


def _command(platform: Platform, summary: str, settings: str) -> click.Command:
    wait = f"{platform.default_timeout_s:g}"
    help_text = (
        f"{summary}\n\n"
        f"Waits at most AGENTMAIL_HOOK_TIMEOUT seconds (default {wait}) for a decision, "
        "then denies with 'timed out'. Set the platform's hook timeout above it.\n\n"
        f"\b\n{settings}"
    )
    return click.Command(platform.name, callback=lambda: _run(platform), help=help_text)


hook.add_command(
    _command(
        PLATFORMS["claude-code"],
        "Claude Code PreToolUse hook.",
        "In .claude/settings.json (timeout in seconds):\n"
        '{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [\n'
        '  {"type": "command", "command": "agentmail hook claude-code", "timeout": 600}]}]}}',
    )
)
hook.add_command(
    _command(
        PLATFORMS["zcode"],
        'ZCode tool hook: prints {"decision":"approve"} or {"decision":"block","reason":...}, '
        "and nothing when the platform's own prompt should decide.",
        "Configure `agentmail hook zcode` as ZCode's pre-tool hook command, with a hook\n"
        "timeout above AGENTMAIL_HOOK_TIMEOUT.",
    )
)
hook.add_command(
    _command(
        PLATFORMS["gemini"],
        "Gemini CLI BeforeTool hook ('ask' is answered as deny: see the module docs).",
        "In ~/.gemini/settings.json (timeout in milliseconds):\n"
        '{"hooks": {"BeforeTool": [{"matcher": "*", "hooks": [{"name": "agentmail",\n'
        '  "type": "command", "command": "agentmail hook gemini", "timeout": 60000}]}]}}',
    )
)
hook.add_command(
    _command(
        PLATFORMS["generic"],
        "Generic hook for any headless agent: stdin {tool_name, tool_input, tool_use_id?}, "
        'stdout {"decision":"allow"|"deny","reason":...}; exit 0 allow, 2 deny.',
        "Call it from your agent before each guarded tool call, with AGENTMAIL_SESSION_ID\n"
        "set (the bridge sets it for every mail-driven turn).",
    )
)
hook.add_command(
    _command(
        PLATFORMS["codex"],
        "Codex PreToolUse hook: a deny in Claude's shape, {} otherwise (Codex runs the "
        "tool under its own sandbox). Codex runs it only with --dangerously-bypass-hook-trust "
        "or once a person trusted it in the TUI.",
        "In $CODEX_HOME/config.toml (timeout in seconds; `agentmail install-hook codex`):\n"
        '[[hooks.PreToolUse]]\nmatcher = "*"\n[[hooks.PreToolUse.hooks]]\ntype = "command"\n'
        'command = "agentmail hook codex || { echo blocked >&2; exit 2; }"\ntimeout = 600',
    )
)
hook.add_command(
    _command(
        PLATFORMS["pi"],
        "pi tool gate: stdin {tool_name, tool_input, tool_use_id?, session_id?, cwd?}, stdout "
        '{"decision":"allow"|"deny"|"ask","reason":...}. Run by the agentmail extension for pi.',
        "Install the extension with `agentmail install-hook pi` (or let `agentmail bridge\n"
        "--runner pi` load it with -e); it blocks the tool unless this hook allows.",
    )
)
