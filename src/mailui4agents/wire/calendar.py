"""Calendar shapes (docs/api.md, "Calendar"): what the gateway answers about
scheduled mail, and what the client parses."""

from __future__ import annotations

from pydantic import Field

from mailui4agents.wire.models import AttachmentRef, Lenient, Timestamp


class OccurrenceOut(Lenient):
    """One occurrence that fell due: delivered (`mail_id`) or not (`error`).
    `late`: delivered more than calendar_late_after_s after `due_at` (the
    gateway was down or behind); the mail says so too."""

    due_at: Timestamp
    delivered_at: Timestamp
    late: bool = False
    mail_id: str | None = None
    error: str | None = None


class CalendarEntryOut(Lenient):
    """A calendar entry. `start_at` is wall-clock time in `timezone` with its
    offset; `next_due` and `upcoming` are UTC instants; `occurrences` (newest
    first, at most 50) only on reads of one entry."""

    id: str
    created_by: str
    to: list[str]
    cc: list[str] = Field(default_factory=list)
    subject: str
    body: str = ""
    attachments: list[AttachmentRef] = Field(default_factory=list)
    start_at: str
    timezone: str
    rrule: str | None = None
    status: str
    next_due: Timestamp | None = None
    upcoming: list[Timestamp] = Field(default_factory=list)
    delivered: int = 0
    last_error: str | None = None
    permission_mode: str | None = None
    from_session_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp
    occurrences: list[OccurrenceOut] | None = None
