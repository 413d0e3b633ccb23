"""The one way a time is written as text: RFC 3339 in UTC with a `Z`, as the wire
(wire/models.Timestamp), mail headers of ours, the bridge's prompts and the MCP
tools show it. Pure and light: the hook and the bridge import it too."""

from __future__ import annotations

from datetime import datetime


def rfc3339(dt: datetime, timespec: str = "auto") -> str:
    """`2026-12-02T13:45:00.123456Z` for an aware UTC time (the database's);
    `timespec` as for `datetime.isoformat` ("seconds" for a sentence)."""
    return dt.isoformat(timespec=timespec).replace("+00:00", "Z")


def parse_rfc3339(text: str) -> datetime:
    """The inverse, for what the gateway wrote (`Z` or an offset); ValueError otherwise."""
    return datetime.fromisoformat(text)
