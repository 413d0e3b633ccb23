"""``agentmail install-hook claude-code | codex | gemini | zcode | pi``: register the approval hook.

Writes the platform's settings file so that every guarded tool call runs
``agentmail hook <platform>`` first (docs/behaviour.md#hooks):

- Claude Code: ``.claude/settings.json``, ``hooks.PreToolUse``; handler
  ``timeout`` in **seconds** (default 600, Claude Code's own default), plus
  ``"disableAllHooks": false``.
- Codex: ``hooks.json`` in ``$CODEX_HOME`` (default ``~/.codex``) or ``DIR/.codex``,
  ``hooks.PreToolUse`` (Claude's shape); ``timeout`` in seconds (default 600).
- Gemini CLI: ``.gemini/settings.json``, ``hooks.BeforeTool``; handler
  ``timeout`` in **milliseconds** (default 60000, Gemini's own default).
  ``--timeout`` is always given in seconds and converted.

- ZCode: ``~/.zcode/cli/config.json``, ``hooks.events.PreToolUse`` (user level
  only), timeout in seconds (default 60) — from ZCode's contract, unverified.
- pi: no hook setting exists; the gate extension the package ships is written to
  ``~/.pi/agent/extensions/agentmail.ts`` (``--project``: ``.pi/extensions/``)
  with this installation's ``agentmail`` path in it.

Without ``--project`` the user-level file in the home directory is used.

The file is merged, never replaced: unrelated keys and other hooks stay, an
earlier agentmail hook entry for the same platform is updated in place, and a
second run changes nothing (and says so). A file that is not a JSON object is
refused untouched. The new content goes to a temporary file in the same
directory which is then renamed over the old one, so a crash never leaves a
half-written settings file (a symlinked settings file keeps its link: the
target is replaced).

The hook command names the ``agentmail`` executable by its absolute path when
it can be found — the script being run (``sys.argv[0]``), else the first one
on ``PATH`` — because Claude Code and Gemini run hooks with their own PATH,
which often lacks a virtualenv's ``bin``. The path is not resolved through
symlinks, so a stable link (e.g. ``~/.local/bin/agentmail``) survives
upgrades. Only when neither is found is the bare name used, with a warning.

The hook waits for a person at most ``AGENTMAIL_HOOK_TIMEOUT`` seconds (its
default sits below each platform's default hook timeout). A platform that
kills a still-waiting hook lets the tool run, so with a non-default
``--timeout`` the command line sets ``AGENTMAIL_HOOK_TIMEOUT`` to 90 % of it
(at least 10 s less): ``AGENTMAIL_HOOK_TIMEOUT=3240 /path/agentmail hook
claude-code``. Both platforms run hook commands through a shell; on Windows,
where that prefix does not work, a warning says what to set instead.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click


@dataclass(frozen=True)
class Platform:
    """Where and how one platform wants its tool-use hook."""

    name: str  # as in `agentmail hook NAME`
    directory: str  # settings directory under the project or home
    event: str
    matcher: str
    default_timeout_s: int
    timeout_factor: int  # settings value = seconds * factor
    handler_name: str | None = None  # Gemini names its hooks (for hooksConfig.disabled)
    file_name: str = "settings.json"
    #: Where the event lists live: ``hooks`` (Claude Code, Gemini), ``hooks.events`` (ZCode).
    hooks_path: tuple[str, ...] = ("hooks",)
    user_level_only: bool = False
    #: Appended to the command so that a hook that cannot even start still blocks.
    fail_closed: str = " || exit 2"

    def handler(self, command: str, timeout_s: int) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        if self.handler_name:
            entry["name"] = self.handler_name
        entry.update(type="command", command=command, timeout=timeout_s * self.timeout_factor)
        return entry


CLAUDE_CODE = Platform(
    name="claude-code",
    directory=".claude",
    event="PreToolUse",
    # Exact tool names (Claude Code treats a string of letters and `|` as names, not a
    # regex). MultiEdit is gone from current releases but harmless and kept for older ones.
    matcher="Bash|PowerShell|Write|Edit|MultiEdit|NotebookEdit|Monitor",
    default_timeout_s=600,
    timeout_factor=1,
)
GEMINI = Platform(
    name="gemini",
    directory=".gemini",
    event="BeforeTool",
    matcher="run_shell_command|write_file|replace",
    default_timeout_s=60,
    timeout_factor=1000,
    handler_name="agentmail",
)
#: Codex reads hooks from ``hooks.json`` (Claude's JSON shape) in ``$CODEX_HOME`` or a
#: project's ``.codex/``, and runs them only once trusted (``/hooks`` in the TUI) or with
#: ``--dangerously-bypass-hook-trust``. Exit 2 blocks only with a reason on stderr
#: (0.171.0: exit 2 with an empty stderr let the command run), hence the wrapper.
CODEX = Platform(
    name="codex",
    directory=".codex",
    event="PreToolUse",
    matcher="*",
    default_timeout_s=600,
    timeout_factor=1,
    file_name="hooks.json",
    fail_closed=" || { echo 'the agentmail hook could not run: blocked to be safe' >&2; exit 2; }",
)
# ZCode reads user hooks from ``hooks.events`` in ``~/.zcode/cli/config.json``; the
# entry shape (matcher + command handlers, timeout in seconds) follows its documented
# contract and is unverified against a real binary (docs/platforms.md, "ZCode").
ZCODE = Platform(
    name="zcode",
    directory=".zcode/cli",
    event="PreToolUse",
    matcher="*",
    default_timeout_s=60,
    timeout_factor=1,
    file_name="config.json",
    hooks_path=("hooks", "events"),
    user_level_only=True,
)
PLATFORMS = {platform.name: platform for platform in (CLAUDE_CODE, GEMINI, CODEX, ZCODE)}


HOOK_TIMEOUT_VAR = "AGENTMAIL_HOOK_TIMEOUT"
MIN_TIMEOUT_S = 15


class SettingsError(Exception):
    """The settings file cannot be merged safely; nothing was written."""


@dataclass(frozen=True)
class Result:
    path: Path
    changed: bool
    diff: str
    warnings: tuple[str, ...] = ()


# -- the executable -----------------------------------------------------------------------


def agentmail_executable(
    argv0: str | None = None, which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """The absolute path of the running ``agentmail`` script, else the one on PATH."""
    first = sys.argv[0] if argv0 is None else argv0
    if first and Path(first).name.lower() in ("agentmail", "agentmail.exe"):
        separators = [sep for sep in (os.sep, os.altsep) if sep]
        if any(sep in first for sep in separators):  # run by its path
            if Path(first).is_file():
                return os.path.abspath(first)
        elif found := which(first):  # run by its bare name through PATH
            return os.path.abspath(found)
    found = which("agentmail")
    return os.path.abspath(found) if found else None


FAIL_CLOSED = " || exit 2"


def hook_wait(timeout_s: int) -> int:
    """How long the hook itself may wait for a person when the platform kills it
    after ``timeout_s``: a margin of 10 % (at least 10 s) for start-up and the
    final check, so the hook always answers before it is killed (a killed hook
    lets the tool run on every supported platform). 600 → 540 and 60 → 50, the
    hook's own defaults."""
    return timeout_s - max(10, timeout_s // 10)


def hook_command(platform: Platform, executable: str | None, timeout_s: int | None = None) -> str:
    """The shell command line the platform runs: ``<agentmail> hook <platform>``.

    With a platform timeout other than the default, the hook's own deadline
    must shrink or grow with it, so ``AGENTMAIL_HOOK_TIMEOUT`` is set in the
    command line (POSIX shells; both platforms run hook commands through one).
    """
    program = executable or "agentmail"
    if os.name == "nt":
        quoted = f'"{program}"' if " " in program else program
    else:
        quoted = shlex.quote(program)
    command = f"{quoted} hook {platform.name}"
    if timeout_s is not None and timeout_s != platform.default_timeout_s and os.name != "nt":
        command = f"{HOOK_TIMEOUT_VAR}={hook_wait(timeout_s)} {command}"
    if os.name != "nt":
        # Fail closed even if the hook cannot start (broken install, missing
        # interpreter): both platforms treat exit 1 or 127 as "go ahead", but
        # exit 2 as "block". A working hook exits 0 and this never fires.
        command += platform.fail_closed
    return command


def _is_ours(platform: Platform, handler: Any) -> bool:
    """An agentmail hook handler for ``platform``, whatever path it was installed with."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    pattern = (
        r"(?:agentmail(?:\.exe)?['\"]?|mailui4agents\.cli\.main)\s+hook\s+"
        + re.escape(platform.name)
        + r"(?:\s|$)"
    )
    return re.search(pattern, handler["command"]) is not None


# -- merging --------------------------------------------------------------------------------


def merge(
    settings: dict[str, Any], platform: Platform, handler: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``settings`` with exactly one agentmail hook for ``platform``.

    Earlier agentmail handlers of this platform are removed wherever they are
    (a group left empty by that goes too) and the wanted group takes the place
    of the first one, so re-installing with another path or timeout updates in
    place. Everything else is kept as it was, in its order.
    """
    merged: dict[str, Any] = json.loads(json.dumps(settings))  # deep copy, JSON types only
    warnings: list[str] = []
    hooks: Any = merged
    for depth, key in enumerate(platform.hooks_path, 1):
        hooks = hooks.setdefault(key, {})
        if not isinstance(hooks, dict):
            raise SettingsError(f'"{".".join(platform.hooks_path[:depth])}" is not a JSON object')
    groups = hooks.setdefault(platform.event, [])
    if not isinstance(groups, list):
        raise SettingsError(
            f'"{".".join(platform.hooks_path)}.{platform.event}" is not a JSON array'
        )
    wanted = {"matcher": platform.matcher, "hooks": [handler]}
    kept: list[Any] = []
    position: int | None = None
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list) or not any(_is_ours(platform, h) for h in inner):
            kept.append(group)
            continue
        if position is None:
            position = len(kept)
        others = [h for h in inner if not _is_ours(platform, h)]
        if others:
            kept.append({**group, "hooks": others})
    kept.insert(len(kept) if position is None else position, wanted)
    hooks[platform.event] = kept
    if platform is CLAUDE_CODE:
        if merged.get("disableAllHooks") is True:
            warnings.append('"disableAllHooks" was true; set to false so the hook runs')
        merged["disableAllHooks"] = False
    if platform is GEMINI:
        config = merged.get("hooksConfig")
        if isinstance(config, dict):
            if config.get("enabled") is False:
                warnings.append(
                    '"hooksConfig.enabled" is false: Gemini will not run any hook until '
                    "you set it to true"
                )
            disabled = config.get("disabled")
            if isinstance(disabled, list) and platform.handler_name in disabled:
                warnings.append(
                    f'"hooksConfig.disabled" lists "{platform.handler_name}": Gemini will '
                    "skip the hook until you remove it there"
                )
    return merged, warnings


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"cannot read it: {error}") from error


def parse_settings(raw: str | None) -> dict[str, Any] | None:
    """The settings object in ``raw``, None when there is none (or it is blank)."""
    if raw is None or not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise SettingsError(
            f"it is not valid JSON ({error}; comments are not supported); fix or move it"
        ) from error
    if not isinstance(data, dict):
        raise SettingsError("it is valid JSON but not an object")
    return data


def read_settings(path: Path) -> dict[str, Any] | None:
    """The settings object, None when the file does not exist (or is blank)."""
    return parse_settings(read_text(path))


def render(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` via a temporary file in the same directory, then rename it.

    The existing file's permission bits are kept; a new file gets the umask's.
    """
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def install(
    platform: Platform, settings_path: Path, command: str, timeout_s: int | None = None
) -> Result:
    """Merge the hook into ``settings_path``; write only when something changes."""
    existing = read_settings(settings_path)
    before = existing if existing is not None else {}
    handler = platform.handler(command, timeout_s or platform.default_timeout_s)
    after, warnings = merge(before, platform, handler)
    if existing is not None and after == existing:
        return Result(settings_path, changed=False, diff="", warnings=tuple(warnings))
    old_text = render(existing) if existing is not None else None
    return write_changes(settings_path, old_text, render(after), warnings)


def write_changes(path: Path, old: str | None, new: str, warnings: list[str]) -> Result:
    """Write ``new`` atomically and describe the change as a unified diff."""
    diff = "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{path} (before)" if old is not None else "/dev/null",
            tofile=str(path),
            n=2,
        )
    )
    write_atomically(path, new)
    return Result(path, changed=True, diff=diff, warnings=tuple(warnings))


def settings_path_for(platform: Platform, project: str | None) -> Path:
    if project is None and platform is CODEX and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]).expanduser().absolute() / platform.file_name
    base = Path(project).expanduser() if project is not None else Path.home()
    return base.absolute() / platform.directory / platform.file_name


# -- the command ------------------------------------------------------------------------------


PI = "pi"
DSH = "dsh"
PI_DEFAULT_LINE = re.compile(r"^const DEFAULT_COMMAND: string\[\] = .*$", re.MULTILINE)


def pi_extension_path(project: str | None) -> Path:
    """pi auto-loads extensions from ``~/.pi/agent/extensions/`` (or PI_CODING_AGENT_DIR)
    and a project's ``.pi/extensions/``."""
    if project is not None:
        return Path(project).expanduser().absolute() / ".pi" / "extensions" / "agentmail.ts"
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR")
    base = Path(agent_dir) if agent_dir else Path.home() / ".pi" / "agent"
    return base.absolute() / "extensions" / "agentmail.ts"


def pi_extension_text(executable: str | None, timeout_s: int | None) -> str:
    """The shipped gate extension with this installation's hook command in it."""
    from mailui4agents.bridge.runners.pi import extension_path

    text = extension_path().read_text(encoding="utf-8")
    command = [executable or "agentmail", "hook", "pi"]
    line = f"const DEFAULT_COMMAND: string[] = {json.dumps(command)};"
    if timeout_s is not None:
        line += f"\nprocess.env.{HOOK_TIMEOUT_VAR} ??= {json.dumps(str(timeout_s))};"
    return PI_DEFAULT_LINE.sub(lambda _m: line, text, count=1)


def install_pi(path: Path, text: str) -> Result:
    """Write the extension file; unchanged when it already has this content."""
    old = read_text(path)
    if old == text:
        return Result(path, changed=False, diff="")
    return write_changes(path, old, text, [])


def report(result: Result, executable: str | None, *, unchanged: str, done: str) -> None:
    """Tell what an install did: warnings, then the diff, or that nothing changed."""
    if executable is None:
        click.echo(
            "warning: the agentmail executable was not found; the entry runs plain "
            "`agentmail`, which must be on the PATH the agent runs with",
            err=True,
        )
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if not result.changed:
        click.echo(unchanged)
        return
    click.echo(result.diff, nl=False)
    click.echo(done)


def timeout_warnings(platform: Platform, command: str, timeout_s: int) -> list[str]:
    """A hook deadline that would outlast the platform's timeout fails open: say so."""
    if HOOK_TIMEOUT_VAR in command:
        return []
    wait = hook_wait(timeout_s)
    if timeout_s != platform.default_timeout_s:  # no env prefix on this system
        return [
            f"set {HOOK_TIMEOUT_VAR} to at most {wait} in the agent's environment: the "
            f"hook must answer before {platform.name} kills it after {timeout_s} s"
        ]
    raw = os.environ.get(HOOK_TIMEOUT_VAR, "")
    try:
        exported = float(raw) if raw else None
    except ValueError:
        exported = None
    if exported is not None and exported > wait:
        return [
            f"{HOOK_TIMEOUT_VAR}={raw} in this environment outlasts {platform.name}'s hook "
            f"timeout ({timeout_s} s); if the agent inherits it, lower it to {wait} or "
            "install with a larger --timeout"
        ]
    return []
