"""What the bridge is doing per mail session, for the heartbeat (docs/bridge.md).

The gateway keeps it on the session and shows it, so a person can always see
why nothing is happening: queued behind another turn, running since when,
parked on which request, or failed and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_SESSIONS = 200  # the heartbeat stays small whatever the backlog


@dataclass
class Activity:
    state: str  # queued | running | parked | failed
    mail_id: str
    since: float = field(default_factory=time.time)
    request_id: str | None = None
    reason: str | None = None

    def as_dict(self, session_id: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": session_id,
            "state": self.state,
            "mail_id": self.mail_id,
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since)),
        }
        if self.request_id:
            data["request_id"] = self.request_id
        if self.reason:
            data["reason"] = self.reason[:500]
        return data


@dataclass
class Board:
    """Per-session activity; ``on_change`` fires on every change (heartbeat now)."""

    on_change: Callable[[], None] = lambda: None
    sessions: dict[str, Activity] = field(default_factory=dict)

    def set(self, session_id: str, activity: Activity) -> None:
        self.sessions[session_id] = activity
        self.on_change()

    def clear(self, session_id: str) -> None:
        if self.sessions.pop(session_id, None) is not None:
            self.on_change()

    def snapshot(self) -> list[dict[str, Any]]:
        items = sorted(self.sessions.items(), key=lambda kv: kv[1].since)
        return [a.as_dict(sid) for sid, a in items[:MAX_SESSIONS]]
