"""What a turn driver prints on stdout, one JSON object a line, and its parser.

- ``{"type":"session","id":...}`` the platform session id (stored for the next turn);
- ``{"type":"denied","tool":...,"reason":...}`` a tool call the human (or the mode) refused;
- ``{"type":"text","text":...}`` the final answer (the last one wins);
- ``{"type":"error","message":...}`` the turn failed for this reason.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mailui4agents.bridge.runners.base import (
    Denied,
    FinalText,
    SessionStarted,
    StreamParser,
    TurnError,
    TurnEvent,
)


def emit(kind: str, **fields: Any) -> None:
    """Print one line for the bridge (flushed: the bridge reads as it comes)."""
    sys.stdout.write(json.dumps({"type": kind, **fields}, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class DriverParser(StreamParser):
    def feed(self, line: str) -> list[TurnEvent]:
        try:
            record = json.loads(line)
        except ValueError:
            return []
        if not isinstance(record, dict):
            return []
        kind = record.get("type")
        if kind == "session" and isinstance(record.get("id"), str) and record["id"]:
            return [SessionStarted(record["id"])]
        if kind == "denied":
            return [Denied(str(record.get("tool")), str(record.get("reason") or ""))]
        if kind == "text" and isinstance(record.get("text"), str):
            return [FinalText(record["text"])]
        if kind == "error":
            return [TurnError(str(record.get("message") or "the turn failed"))]
        return []
