"""The one small interface every runner implements (docs/bridge.md, "Runners").

A runner knows one agent CLI: how to start a headless turn for a mode (command
line, environment, stdin), how to read its output stream into common
:data:`TurnEvent` values, which enforcement each mode really has, and where
the platform keeps its own sessions (for adoption).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mailui4agents.domain.aliases import slugify
from mailui4agents.domain.modes import Enforcement, Mode
from mailui4agents.domain.times import rfc3339


@dataclass(frozen=True)
class TurnContext:
    """What a runner needs to start one turn."""

    agent: str
    mail_id: str
    session_id: str
    mode: Mode
    workspace: Path
    platform_session_id: str | None  # None on the first turn of a mail session
    prompt: str
    base_env: dict[str, str]  # the environment every runner passes (API: Bridge)
    turn_dir: Path  # private scratch folder of this turn (config files live here)
    hook_timeout_s: float
    #: The turn runs inside the bridge's sandbox (docs/sandbox.md): a CLI's own
    #: sandbox cannot nest inside it (Landlock forbids mounts) and is left off.
    sandboxed: bool = False


@dataclass(frozen=True)
class Launch:
    """How to start the CLI for one turn."""

    argv: list[str]
    env: dict[str, str]
    stdin: bytes = b""


@dataclass(frozen=True)
class SessionStarted:
    """The platform's session id for this turn (stored for the next one)."""

    id: str


@dataclass(frozen=True)
class Text:
    """Text the model said; appended to the final answer."""

    text: str


@dataclass(frozen=True)
class FinalText:
    """The platform's own final answer; replaces what was appended so far."""

    text: str


@dataclass(frozen=True)
class Denied:
    """A tool call that was refused (read from the stream: the exit code stays 0)."""

    tool: str
    reason: str


@dataclass(frozen=True)
class MailSent:
    """The model sent mail itself during the turn (so: no automatic relay)."""

    tool: str


@dataclass(frozen=True)
class TurnError:
    """The turn failed; ``message`` is what the platform said."""

    message: str


TurnEvent = SessionStarted | Text | FinalText | Denied | MailSent | TurnError


class StreamParser(ABC):
    """Reads one turn's stdout, line by line."""

    @abstractmethod
    def feed(self, line: str) -> list[TurnEvent]:
        """Events for one line of stdout (without its newline)."""

    def finish(self) -> list[TurnEvent]:
        """Events once stdout has ended (plain-text runners answer here)."""
        return []


#: Claude Code, Codex and Gemini kill a hook after its timeout; ours is given
#: this much more than the bridge's own wait, so it answers first.
HOOK_MARGIN_S = 60
_VERSION = re.compile(r"\d+\.\d+\.\d+\S*")


def reject_unknown(runner: str, options: dict[str, str], accepted: str) -> None:
    """The --runner-arg names left over after a runner took its own."""
    if options:
        raise ValueError(
            f"unknown --runner-arg for {runner}: {', '.join(sorted(options))} "
            f"(accepted: {accepted})"
        )


def cli_version(
    argv: list[str],
    *,
    timeout_s: float = 30,
    env: dict[str, str] | None = None,
    also_stderr: bool = False,
) -> str | None:
    """The first x.y.z a CLI's `--version` prints (on stdout, or also stderr), or None."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stdout + (done.stderr if also_stderr else ""))
    return match.group(0) if match else None


class Runner(ABC):
    """One agent CLI."""

    name: str = ""  # the --runner value
    platform: str = ""  # reported in the heartbeat
    #: False: the CLI cannot resume its session, so each turn starts a new one and
    #: the prompt carries the mail session's thread so far (docs/bridge.md, "Prompt").
    resumes: bool = True

    @abstractmethod
    def enforcement(self, mode: Mode) -> Enforcement:
        """How much this runner really guarantees in ``mode`` (unknown: advisory)."""

    @property
    def mode_enforcement(self) -> Enforcement:
        """The one value the heartbeat reports: the runner's guarantee in workspace mode."""
        return self.enforcement("workspace")

    @abstractmethod
    def missing(self) -> str | None:
        """Why the CLI cannot be started (not installed), or None."""

    @abstractmethod
    def version(self) -> str | None:
        """The CLI's version, when it can tell."""

    @abstractmethod
    def launch(self, ctx: TurnContext) -> Launch:
        """The command line, environment and stdin of one turn."""

    @abstractmethod
    def parser(self) -> StreamParser:
        """A fresh parser for one turn's output."""

    def sandbox_unsupported(self) -> str | None:
        """Why the turn's sandbox cannot confine this runner's tools, or None
        (docs/sandbox.md)."""
        return None

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """The CLI's own state folders and files, writable inside the sandbox in
        every mode (docs/sandbox.md, "State folders of each runner"); ``env`` is the
        turn's, ``state_dir`` the bridge's."""
        return []

    def model_ports(self, env: Mapping[str, str]) -> list[int]:
        """TCP ports of the model provider besides those the environment's base
        URLs name (docs/sandbox.md, "Network")."""
        return []

    def open(self) -> None:  # noqa: B027 (optional: most runners keep nothing)
        """Start what the runner keeps for the bridge's whole life (opencode: its
        server). Called once, in a worker thread, before the first turn; a failure
        is reported by :meth:`missing` rather than raised."""

    def close(self) -> None:  # noqa: B027
        """Stop what :meth:`open` started (called once when the bridge stops)."""

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """The platform's own recent sessions in these workspaces (heartbeat, adoption)."""
        return []

    def describe_defaults(self) -> str:
        """One log line saying which defaults this runner uses (model and the like)."""
        return f"runner {self.name}: no defaults to report"


class BinaryRunner(Runner):
    """A runner for an installed CLI binary; its version is asked once."""

    binary: str = ""
    _version: str | None = None
    version_timeout_s: float = 30
    version_in_stderr = False

    def version_env(self) -> dict[str, str] | None:
        return None  # this process's environment

    def can_ask_version(self) -> bool:
        return shutil.which(self.binary) is not None

    def version(self) -> str | None:
        if self._version is None and self.can_ask_version():
            self._version = cli_version(
                [self.binary, "--version"],
                timeout_s=self.version_timeout_s,
                env=self.version_env(),
                also_stderr=self.version_in_stderr,
            )
        return self._version


def json_object(line: str) -> dict[str, Any] | None:
    """One line of a CLI's JSON-lines stream as an object; None for anything else
    (a banner, a partial line, a JSON scalar): parsers skip those lines."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


#: How many of its own sessions a runner lists in the heartbeat (adoption).
RECENT_SESSIONS = 20

PlatformSession = dict[str, Any]  # the heartbeat's platform_sessions item (docs/api.md)


def recent_files(
    root: Path,
    pattern: str,
    read: Callable[[Path], PlatformSession | None],
    *,
    by_name: bool = False,
) -> list[PlatformSession]:
    """The sessions that `read` finds in the newest RECENT_SESSIONS files below `root`
    matching `pattern`: newest by modification time, or by name where the name
    starts with the time (Codex rollouts, Gemini chats). A missing folder gives none."""
    try:
        files = list(root.glob(pattern))
    except OSError:
        return []
    files.sort(key=(lambda p: p.name) if by_name else _mtime, reverse=True)
    found = (read(path) for path in files[:RECENT_SESSIONS])
    return [info for info in found if info is not None]


def platform_session(
    platform_id: str,
    title: str,
    cwd: str,
    updated: datetime,
    *,
    default_title: str,
    default_slug: str,
) -> PlatformSession:
    """``{platform_id, slug, title, cwd, updated_at}``: one platform session as the
    heartbeat reports it, its title on one line of at most 120 characters."""
    title = " ".join(title.split())[:120] or default_title
    return {
        "platform_id": platform_id,
        "slug": slugify(title, 40) or default_slug,
        "title": title,
        "cwd": cwd,
        "updated_at": rfc3339(updated),
    }


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
