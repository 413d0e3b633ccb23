"""``agentmail install-hook claude-code --interactive``: the terminal and the phone
together (docs/platforms.md, "Interactive sessions"; mailui4agents/hooks/race.py).

One ``agentmail hook claude-code`` command on several events of Claude Code's
settings file, each entry run with ``AGENTMAIL_INTERACTIVE=1``:

- ``PreToolUse`` (the guarded tools): protected paths are denied; nothing else
  is decided there, so the terminal's own rules and dialog stay in charge.
- ``PermissionRequest``: asks the session's deciders while the dialog is up;
  the first answer wins.
- ``PostToolUse`` / ``PostToolUseFailure``: withdraws the remote request when
  the terminal answered first.
- ``Notification``, ``Stop``, ``UserPromptSubmit``: "waiting for you" and mail
  into the running session (hooks/idle.py, hooks/mail_in.py).

Only the tool gate and ``PermissionRequest`` fail closed (`` || exit 2``): on
``Stop`` or ``UserPromptSubmit`` an exit 2 would keep the agent going or
swallow the person's prompt, so a broken install there must exit quietly.
The file is merged as cli/install.py does: other hooks and keys stay, and a
second run changes nothing.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from mailui4agents.cli import install as install_module
from mailui4agents.cli.common import fail
from mailui4agents.cli.install import (
    CLAUDE_CODE,
    Platform,
    Result,
    SettingsError,
    hook_command,
    merge,
    parse_settings,
    read_text,
    render,
    report,
    settings_path_for,
    write_changes,
)

INTERACTIVE_VAR = "AGENTMAIL_INTERACTIVE=1"

#: Seconds for the events that never wait for a person.
QUICK_TIMEOUT_S = 15


@dataclasses.dataclass(frozen=True)
class Event:
    name: str
    matcher: str
    #: None: the platform's hook timeout (``--timeout``); else this many seconds.
    timeout_s: int | None
    fail_closed: bool


#: The events of an interactive install, per platform.
EVENTS: dict[str, tuple[Event, ...]] = {
    CLAUDE_CODE.name: (
        Event("PreToolUse", CLAUDE_CODE.matcher, QUICK_TIMEOUT_S, fail_closed=True),
        Event("PermissionRequest", "*", None, fail_closed=False),
        Event("PostToolUse", CLAUDE_CODE.matcher, QUICK_TIMEOUT_S, fail_closed=False),
        Event("PostToolUseFailure", CLAUDE_CODE.matcher, QUICK_TIMEOUT_S, fail_closed=False),
        Event("Notification", "*", QUICK_TIMEOUT_S, fail_closed=False),
        Event("Stop", "*", QUICK_TIMEOUT_S, fail_closed=False),
        Event("UserPromptSubmit", "*", QUICK_TIMEOUT_S, fail_closed=False),
    ),
}

PLATFORMS: dict[str, Platform] = {CLAUDE_CODE.name: CLAUDE_CODE}


def event_command(
    platform: Platform, event: Event, executable: str | None, timeout: int | None
) -> str:
    """``AGENTMAIL_INTERACTIVE=1 <agentmail> hook <platform>``, failing closed
    only where the event's exit 2 blocks a tool."""
    wait = timeout if event.timeout_s is None else None
    quiet = dataclasses.replace(
        platform, fail_closed=platform.fail_closed if event.fail_closed else ""
    )
    command = hook_command(quiet, executable, wait)
    if os.name == "nt":
        return command
    return f"{INTERACTIVE_VAR} {command}"


def merged_settings(
    platform: Platform, settings: dict[str, Any], executable: str | None, timeout: int | None
) -> tuple[dict[str, Any], list[str]]:
    """``settings`` with one agentmail entry on each interactive event."""
    warnings: list[str] = []
    for event in EVENTS[platform.name]:
        seconds = event.timeout_s or timeout or platform.default_timeout_s
        on_event = dataclasses.replace(platform, event=event.name, matcher=event.matcher)
        handler = on_event.handler(event_command(platform, event, executable, timeout), seconds)
        settings, said = merge(settings, on_event, handler)
        warnings.extend(w for w in said if w not in warnings)
    return settings, warnings


def install_interactive(platform_name: str, project: str | None, timeout: int | None) -> None:
    """The ``--interactive`` form of ``agentmail install-hook`` (cli/install.py)."""
    platform = PLATFORMS.get(platform_name)
    if platform is None:
        fail(
            f"--interactive is for {', '.join(sorted(PLATFORMS))}; {platform_name} keeps "
            "its tool gate (docs/platforms.md, 'Interactive sessions')"
        )
    executable = install_module.agentmail_executable()  # looked up late: tests replace it
    path = settings_path_for(platform, project)
    try:
        result = _install(platform, path, executable, timeout)
    except (SettingsError, OSError) as error:
        fail(f"not changing {path}: {error}")
    report(
        result,
        executable,
        unchanged=f"agentmail interactive hooks for {platform.name} already in {path}; no change.",
        done=f"Installed the agentmail interactive hooks for {platform.name} in {path}.",
    )


def _install(platform: Platform, path: Path, executable: str | None, timeout: int | None) -> Result:
    existing = parse_settings(read_text(path))
    merged, warnings = merged_settings(platform, existing or {}, executable, timeout)
    if existing is not None and merged == existing:
        return Result(path, changed=False, diff="", warnings=tuple(warnings))
    old = render(existing) if existing is not None else None
    return write_changes(path, old, render(merged), warnings)
