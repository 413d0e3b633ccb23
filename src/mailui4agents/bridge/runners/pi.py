"""pi runner (``--runner pi``), checked against ``@mariozechner/pi-coding-agent`` 0.73.1.

One turn (prompt on stdin: pi's print mode merges piped stdin into the prompt)::

    pi -p --mode json --no-extensions -e <package>/assets/pi-agentmail.ts
       [--session ID] [--model M] [--tools read,grep,find,ls]    (plan only)

- pi has no permission prompt and no hook command. The shipped extension is
  the gate: its ``tool_call`` handler runs ``agentmail hook pi`` (the command is
  passed in ``AGENTMAIL_PI_HOOK``) for every tool but pi's read-only ones and
  blocks unless the hook answers allow. It fails closed: a hook that cannot be
  started, crashes, answers garbage or outlives its deadline blocks the tool.
  ``--no-extensions`` keeps a person's own extensions (which could allow by
  themselves or change tool inputs) out of mail-driven turns.
- Modes: ``plan`` → ``--tools read,grep,find,ls`` (pi then offers the model no
  tool that writes) and the gate, which denies in plan too; ``workspace`` → the
  gate asks a human; ``full`` → the gate allows (the gateway answers "full"
  without asking anyone).
- The first line of the stream is ``{"type":"session","id":…}``; a later turn
  passes ``--session ID``. The final answer is the last assistant message of
  ``agent_end``. pi exits 0 when a tool was blocked: a block is read from
  ``tool_execution_end`` (``isError``). A model error (HTTP 401, 429 …) ends the
  assistant message with ``stopReason: "error"`` and ``errorMessage``.
- Sessions live in ``~/.pi/agent/sessions/--<cwd>--/<timestamp>_<id>.jsonl``
  (``PI_CODING_AGENT_DIR`` moves ``~/.pi/agent``); the heartbeat reports them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from mailui4agents.bridge.runners.base import (
    BinaryRunner,
    Denied,
    FinalText,
    Launch,
    SessionStarted,
    StreamParser,
    TurnContext,
    TurnError,
    TurnEvent,
    json_object,
    platform_session,
    recent_files,
    reject_unknown,
)
from mailui4agents.bridge.runners.claude_code import agentmail_command
from mailui4agents.domain.modes import Enforcement, Mode

READ_ONLY_TOOLS = "read,grep,find,ls"
EXTENSION = "pi-agentmail.ts"
HEAD_BYTES = 64 * 1024


def extension_path() -> Path:
    """The gate extension shipped in this package."""
    return Path(str(resources.files("mailui4agents.bridge.runners") / "assets" / EXTENSION))


class PiParser(StreamParser):
    """``--mode json`` lines into turn events."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.final: str | None = None
        self.error: str | None = None

    def feed(self, line: str) -> list[TurnEvent]:
        record = json_object(line)
        if record is None:
            return []
        kind = record.get("type")
        if kind == "session":
            sid = record.get("id")
            if isinstance(sid, str) and sid and sid != self.session_id:
                self.session_id = sid
                return [SessionStarted(sid)]
        elif kind == "tool_execution_end" and record.get("isError"):
            return [Denied(str(record.get("toolName")), _result_text(record.get("result")))]
        elif kind == "message_end":
            message = record.get("message")
            if (
                isinstance(message, dict)
                and message.get("role") == "assistant"
                and message.get("stopReason") == "error"
            ):
                self.error = str(message.get("errorMessage") or "the model call failed")
        elif kind == "agent_end":
            return self._end(record.get("messages"))
        return []

    def _end(self, messages: Any) -> list[TurnEvent]:
        if self.error is not None:
            return [TurnError(self.error)]
        for message in reversed(messages if isinstance(messages, list) else []):
            if isinstance(message, dict) and message.get("role") == "assistant":
                return [FinalText(_text(message.get("content")))]
        return []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def _result_text(result: Any) -> str:
    if isinstance(result, dict):
        return _text(result.get("content"))
    return str(result or "")


class PiRunner(BinaryRunner):
    """Headless pi turns, gated by the shipped extension."""

    name = "pi"
    version_in_stderr = True  # pi's version is looked for on stderr too
    platform = "pi"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("pi") or "pi"
        self.model = options.pop("model", "") or None
        home = Path(options.pop("home", "") or os.environ.get("HOME") or Path.home())
        agent_dir = options.pop("agent_dir", "") or os.environ.get("PI_CODING_AGENT_DIR")
        self.agent_dir = Path(agent_dir) if agent_dir else home / ".pi" / "agent"
        reject_unknown("pi", options, "bin=, model=, home=, agent_dir=")

    def enforcement(self, mode: Mode) -> Enforcement:
        # The gate blocks every non-read tool unless the hook allows (fail closed),
        # checked end to end against the real CLI; plan also withholds the tools.
        return "native"

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the pi CLI ({self.binary}) was not found"
        if not extension_path().is_file():
            return f"the agentmail extension for pi is missing ({extension_path()})"
        return None

    def can_ask_version(self) -> bool:
        return self.missing() is None  # the extension too

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """pi's agent folder (sessions, settings): ~/.pi/agent or ``agent_dir=``."""
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        return [str(self.agent_dir)]

    def launch(self, ctx: TurnContext) -> Launch:
        argv = [self.binary, "-p", "--mode", "json", "--no-extensions",
                "-e", str(extension_path())]  # fmt: skip
        if ctx.platform_session_id:
            argv += ["--session", ctx.platform_session_id]
        if self.model:
            argv += ["--model", self.model]
        if ctx.mode == "plan":
            argv += ["--tools", READ_ONLY_TOOLS]
        env = dict(ctx.base_env)
        env["AGENTMAIL_PI_HOOK"] = json.dumps(agentmail_command("hook", "pi"))
        env.setdefault("PI_OFFLINE", "1")
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return PiParser()

    def describe_defaults(self) -> str:
        model = (
            f"model {self.model} (from --runner-arg model=)"
            if self.model
            else "model: pi's own default (its settings.json on this host)"
        )
        return f"runner pi: {self.binary}; {model}; gate {extension_path()}"

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """pi's own sessions, newest first, from ``<agent dir>/sessions/*/*.jsonl``."""
        return recent_files(self.agent_dir / "sessions", "*/*.jsonl", session_info)


def session_info(path: Path) -> dict[str, Any] | None:
    """``{platform_id, slug, title, cwd, updated_at}`` from a pi session file: the
    first line is ``{"type":"session","id":…,"cwd":…}``, the title the first user text."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
        updated = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None
    sid, cwd, title = "", "", ""
    for raw in head.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "session":
            sid, cwd = str(record.get("id") or ""), str(record.get("cwd") or "")
        elif record.get("type") == "session_info" and record.get("name"):
            title = str(record["name"])
        elif not title and record.get("type") == "message":
            message = record.get("message")
            if isinstance(message, dict) and message.get("role") == "user":
                title = _text(message.get("content"))
        if sid and cwd and title:
            break
    if not sid or not cwd:
        return None
    return platform_session(
        sid, title, cwd, updated, default_title=sid, default_slug=f"pi-{sid[:8]}"
    )
