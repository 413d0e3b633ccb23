"""Who is online, as the web UI's contacts page shows it (services/online.py)."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient, Timestamp


class AgentStatusOut(Lenient):
    """An agent's name and mode enforcement; with `details` (for admins and its
    owners) also its platform, version, last heartbeat, open streams and
    whether it is online."""

    name: str
    mode_enforcement: str | None = None
    details: bool = False
    platform: str | None = None
    version: str | None = None
    last_seen_at: Timestamp | None = None
    streams: int = 0
    online: bool = False
    #: The bridge's sandbox report (docs/sandbox.md), with the details only.
    sandbox: dict[str, str | None] | None = None
