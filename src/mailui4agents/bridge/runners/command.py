"""The generic command runner: ``--runner command -- CMD ARGS...`` (docs/bridge.md).

Protocol: the prompt goes to the command's stdin (UTF-8), then stdin is closed;
the context is in the environment (``AGENTMAIL_*``). Stdout is plain text (all
of it is the answer) or, when its first non-empty line is a JSON object with a
``type`` key, JSON lines: ``session`` (the platform session id, passed back as
``AGENTMAIL_PLATFORM_SESSION_ID`` on later turns), ``text`` (appended to the
answer), ``error`` (the turn failed for this reason). Exit 0 = completed.

Approvals: the command asks with ``agentmail hook generic``. The bridge cannot
see whether it does, so the runner reports ``advisory`` unless told otherwise
(``--runner-arg enforcement=partial``).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from mailui4agents.bridge.runners.base import (
    FinalText,
    Launch,
    Runner,
    SessionStarted,
    StreamParser,
    Text,
    TurnContext,
    TurnError,
    TurnEvent,
    reject_unknown,
)
from mailui4agents.domain.modes import Enforcement, Mode, normalise_enforcement


class CommandParser(StreamParser):
    """Plain text or JSON lines, decided by the first non-empty line."""

    def __init__(self) -> None:
        self.json_lines: bool | None = None
        self.plain: list[str] = []

    def feed(self, line: str) -> list[TurnEvent]:
        if self.json_lines is None:
            if not line.strip():
                self.plain.append(line)
                return []
            self.json_lines = _typed_object(line) is not None
        if not self.json_lines:
            self.plain.append(line)
            return []
        record = _typed_object(line)
        if record is None:
            return []  # a stray line between JSON lines carries nothing
        kind = record["type"]
        if kind == "session" and isinstance(record.get("id"), str) and record["id"]:
            return [SessionStarted(record["id"])]
        if kind == "text" and isinstance(record.get("text"), str):
            return [Text(record["text"])]
        if kind == "error":
            return [TurnError(str(record.get("message") or "the command reported an error"))]
        return []

    def finish(self) -> list[TurnEvent]:
        if self.json_lines:
            return []
        return [FinalText("\n".join(self.plain).strip("\n"))]


def _typed_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value
    return None


class CommandRunner(Runner):
    """Any headless agent that follows the protocol above."""

    name = "command"

    def __init__(self, argv: list[str], options: dict[str, str] | None = None) -> None:
        if not argv:
            raise ValueError("the command runner needs the program to run after --")
        options = dict(options or {})
        self.argv = list(argv)
        self.platform = options.pop("platform", "command")
        self._enforcement = normalise_enforcement(options.pop("enforcement", "advisory"))
        self._version = options.pop("version", None)
        reject_unknown("the command runner", options, "platform=, enforcement=, version=")

    def enforcement(self, mode: Mode) -> Enforcement:
        return self._enforcement

    def missing(self) -> str | None:
        program = self.argv[0]
        if os.sep in program:
            if os.path.isfile(program) and os.access(program, os.X_OK):
                return None
            return f"{program} does not exist or is not executable"
        if shutil.which(program) is None:
            return f"{program} was not found on PATH"
        return None

    def version(self) -> str | None:
        return self._version

    def launch(self, ctx: TurnContext) -> Launch:
        return Launch(self.argv, dict(ctx.base_env), ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return CommandParser()

    def describe_defaults(self) -> str:
        return (
            f"runner command: runs {self.argv[0]!r}; enforcement {self._enforcement} "
            "(the bridge cannot see whether the command asks through `agentmail hook generic`)"
        )
