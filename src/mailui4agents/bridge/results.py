"""Per-turn result files: a turn whose CLI finished is not run again after a crash
(docs/bridge.md, "Crash safety").

Right after the CLI exits — before the reply or the failure mail is posted and
before the ledger records the outcome — what the turn came to is written to
``results/MAIL.json`` in the state dir: a temporary file, fsync, rename, fsync of
the folder, so a crash leaves the whole file or none. It is removed once the
ledger holds the outcome. A bridge that died in between finds it at start and
settles the mail from it (posts the reply, mails the failure, or retries) instead
of running the CLI a second time; the relay key makes a reply that did get posted
before the crash a duplicate, not a second mail.

A result belongs to one attempt: it is used only while the ledger's newest
attempt is that attempt and the mail is not completed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from mailui4agents.bridge.failures import Failure, Kind

logger = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class TurnResult:
    """What one attempt's CLI run came to: all the bridge needs to settle the mail."""

    mail_id: str
    attempt: int
    #: Why the turn failed, or None when the CLI completed.
    failure: Failure | None
    #: The final text (relayed to a human when the model did not mail by itself).
    text: str = ""
    #: Mail the turn's processes sent (``AGENTMAIL_SENT_LOG``).
    sent: tuple[str, ...] = ()
    #: The model mailed by itself (the sent log, or the stream said so).
    model_sent: bool = False

    def to_json(self) -> dict[str, Any]:
        failure = None
        if self.failure is not None:
            failure = {"kind": self.failure.kind, "detail": self.failure.detail}
        return {
            "mail_id": self.mail_id,
            "attempt": self.attempt,
            "failure": failure,
            "text": self.text,
            "sent": list(self.sent),
            "model_sent": self.model_sent,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnResult:
        failure = None
        if data.get("failure") is not None:
            kind = data["failure"]["kind"]
            if kind not in get_args(Kind):
                raise ValueError(f"unknown failure kind {kind!r}")
            failure = Failure(kind, str(data["failure"].get("detail", "")))
        return cls(
            mail_id=str(data["mail_id"]),
            attempt=int(data["attempt"]),
            failure=failure,
            text=str(data.get("text", "")),
            sent=tuple(str(i) for i in data.get("sent") or ()),
            model_sent=bool(data.get("model_sent")),
        )


@dataclass
class Results:
    """The ``results/`` folder of one bridge's state dir."""

    folder: Path

    @classmethod
    def open(cls, folder: Path) -> Results:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in folder.glob(".*.tmp"):  # a write the bridge died in: never renamed
            stale.unlink(missing_ok=True)
        return cls(folder)

    def path(self, mail_id: str) -> Path:
        """The file of ``mail_id``; an id that is no plain file name is hashed."""
        name = (
            mail_id
            if _SAFE_NAME.fullmatch(mail_id)
            else hashlib.sha256(mail_id.encode()).hexdigest()
        )
        return self.folder / f"{name}.json"

    def save(self, result: TurnResult) -> None:
        """Write ``result`` atomically and durably (it replaces an older one)."""
        path = self.path(result.mail_id)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # ASCII escapes: a lone surrogate in the model's text cannot be encoded
        # as UTF-8, and a result that fails to save makes the CLI run again.
        data = json.dumps(result.to_json()).encode()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        folder = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(folder)  # the rename itself survives a power cut
        finally:
            os.close(folder)

    def load(self, mail_id: str) -> TurnResult | None:
        """The saved result of ``mail_id``; None when there is none or it is unreadable."""
        path = self.path(mail_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            result = TurnResult.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("%s: unreadable turn result (%s): ignored", path, exc)
            return None
        return result if result.mail_id == mail_id else None

    def drop(self, mail_id: str) -> None:
        self.path(mail_id).unlink(missing_ok=True)
