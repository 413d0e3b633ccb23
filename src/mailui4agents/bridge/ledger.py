"""The crash-safe delivery ledger (docs/bridge.md, "Crash safety").

Append-only JSON lines, each written with one ``write`` and fsync'd before the
bridge acts on it. Per mail: ``delivered`` (a turn is about to start; its
attempt number), ``started`` (the turn's process group, so a later life can stop
an orphan), ``completed`` (done, whatever the outcome: answered, failure mailed,
or given up). Completed mail is never delivered again; delivered-but-not-completed
mail (the bridge died mid-turn) is delivered again with the "interrupted" headline —
unless the turn's CLI had finished and its result file (``results.py``) survived:
then it is settled from that file without running again.
Recording only "delivered" would turn every crash into a lost mail.

A torn last line (the bridge died inside a write) is skipped on load, and the
file is cut back to the last whole line so the next append starts clean.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


@dataclass
class Entry:
    """What the ledger knows about one mail."""

    mail_id: str
    attempts: int = 0  # "delivered" lines so far
    completed: bool = False
    outcome: str | None = None
    session_id: str | None = None
    last_state: str | None = None  # "delivered", "started", "failed" or "completed"
    pgid: int | None = None  # of the newest attempt's process group
    start_ticks: int | None = None  # its start time, to tell it from a reused pid
    own: tuple[str, ...] = ()  # mail the turn sent: its relay, mail the model sent itself


@dataclass
class Ledger:
    """The ledger file and its state in memory."""

    path: Path
    entries: dict[str, Entry] = field(default_factory=dict)
    skipped_lines: int = 0
    #: Every mail the agent's turns sent (to recognise a reply to its own mail).
    own_mail: set[str] = field(default_factory=set)

    @classmethod
    def open(cls, path: Path) -> Ledger:
        """Load ``path`` (creating it), skipping a torn or unreadable line."""
        path.parent.mkdir(parents=True, exist_ok=True)
        ledger = cls(path)
        if path.exists():
            ledger._load()
        return ledger

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = 0
        offset = 0
        for line in raw.splitlines(keepends=True):
            offset += len(line)
            if not line.endswith(b"\n"):
                self.skipped_lines += 1  # torn: the write never finished
                break
            try:
                record = json.loads(line)
                self._apply(record)
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1
                logger.warning("ledger %s: skipped an unreadable line", self.path)
            good_end = offset
        if good_end < len(raw):
            with self.path.open("r+b") as f:
                f.truncate(good_end)
                os.fsync(f.fileno())

    def _apply(self, record: dict[str, Any]) -> None:
        mail_id = str(record["mail_id"])
        entry = self.entries.setdefault(mail_id, Entry(mail_id))
        state = record["state"]
        if state not in ("delivered", "started", "failed", "completed"):
            raise ValueError(f"unknown ledger state {state!r}")
        entry.last_state = state
        if state == "delivered":
            entry.attempts = int(record.get("attempt", entry.attempts + 1))
            entry.session_id = record.get("session_id") or entry.session_id
        elif state == "started":
            entry.pgid = int(record["pgid"])
            entry.start_ticks = record.get("start_ticks")
        elif state == "failed":
            entry.outcome = record.get("outcome")
            entry.pgid = None
        else:
            entry.completed = True
            entry.outcome = record.get("outcome")
            entry.pgid = None
            entry.own = tuple(str(i) for i in record.get("own") or ())
            self.own_mail.update(entry.own)

    def _append(self, record: dict[str, Any]) -> None:
        record["at"] = round(time.time(), 3)
        data = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._apply(record)

    # -- the three states -------------------------------------------------------------

    def delivered(self, mail_id: str, session_id: str) -> int:
        """Record that an attempt starts; returns its number (1 for the first)."""
        attempt = self.get(mail_id).attempts + 1
        self._append(
            {"mail_id": mail_id, "state": "delivered", "attempt": attempt, "session_id": session_id}
        )
        return attempt

    def started(self, mail_id: str, pgid: int, start_ticks: int | None) -> None:
        """Record the attempt's process group."""
        self._append(
            {"mail_id": mail_id, "state": "started", "pgid": pgid, "start_ticks": start_ticks}
        )

    def failed(self, mail_id: str, outcome: str) -> None:
        """Record that an attempt failed in a way worth retrying (not an interruption)."""
        self._append({"mail_id": mail_id, "state": "failed", "outcome": outcome})

    def completed(self, mail_id: str, outcome: str, own: list[str] | None = None) -> None:
        """Record that the mail is done for good (``own``: the mail its turn sent)."""
        record: dict[str, Any] = {"mail_id": mail_id, "state": "completed", "outcome": outcome}
        if own:
            record["own"] = own
        self._append(record)

    # -- questions --------------------------------------------------------------------

    def get(self, mail_id: str) -> Entry:
        return self.entries.get(mail_id) or Entry(mail_id)

    def is_completed(self, mail_id: str) -> bool:
        return self.get(mail_id).completed

    def was_interrupted(self, mail_id: str) -> bool:
        """The last attempt was delivered but neither completed nor failed: the
        bridge died (or was stopped) in the middle of it."""
        return self.get(mail_id).last_state in ("delivered", "started")

    def unfinished(self) -> list[Entry]:
        """Mail delivered but not completed, oldest first."""
        return [e for e in self.entries.values() if e.attempts > 0 and not e.completed]
