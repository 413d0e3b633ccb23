"""Delivering calendar entries that fell due, each occurrence exactly once
(docs/behaviour.md#calendar).

Any number of gateway processes may run this at once on one database. Each
occurrence is claimed by a conditional UPDATE — `WHERE id = ? AND status =
'scheduled' AND next_due = ?` — that moves `next_due` on, in the same transaction
that stores the mail: exactly one transaction sees rowcount 1, and if it fails
before committing, the claim and the mail vanish together and the next pass
retries. The same holds for an edit: it changes `next_due`, so a claim computed
from the old value matches nothing. A unique (entry, due time) row in
`calendar_occurrences` is a second guard, and the record of what was delivered
when (and whether late).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import (
    AgentRow,
    CalendarAttachmentRow,
    CalendarEntryRow,
    CalendarOccurrenceRow,
    UserRow,
)
from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.results import Sent
from mailui4agents.domain.times import rfc3339
from mailui4agents.services import mail
from mailui4agents.services.calendar import DONE, FAILED, SCHEDULED, schedule_of
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings


@dataclass(frozen=True)
class Due:
    entry_id: str
    due_at: datetime


async def due(s: AsyncSession, now: datetime, limit: int) -> list[Due]:
    """Occurrences due at `now`, oldest first (a read: an idle gateway never writes)."""
    rows = await s.execute(
        select(CalendarEntryRow.id, CalendarEntryRow.next_due)
        .where(CalendarEntryRow.status == SCHEDULED, CalendarEntryRow.next_due <= now)
        .order_by(CalendarEntryRow.next_due)
        .limit(limit)
    )
    return [Due(i, d) for i, d in rows.all() if d is not None]


async def _sender(s: AsyncSession, row: CalendarEntryRow) -> Principal | None:
    if row.creator_kind == "user":
        user = await s.scalar(select(UserRow).where(UserRow.username == row.created_by))
        return None if user is None else Principal("user", user.id, user.username, user.is_admin)
    agent = await s.scalar(select(AgentRow).where(AgentRow.name == row.created_by))
    return None if agent is None else Principal("agent", agent.id, agent.name)


def late_note(row: CalendarEntryRow, due_at: datetime, now: datetime) -> str:
    """What a late mail says about itself, after its body."""
    local = due_at.astimezone(schedule_of(row).tz)
    return (
        f"\n\n---\nScheduled for {local.isoformat(timespec='minutes')} ({row.timezone}); "
        f"delivered late, at {rfc3339(now, 'seconds')}: "
        "the gateway was not running at the scheduled time."
    )


async def deliver_one(s: AsyncSession, settings: Settings, d: Due, now: datetime) -> bool:
    """Claim and deliver one occurrence inside the caller's write transaction.
    False when another process (or an edit, or a cancel) got there first."""
    row = await s.get(CalendarEntryRow, d.entry_id, populate_existing=True)
    if row is None or row.status != SCHEDULED or row.next_due != d.due_at:
        return False
    nxt = schedule_of(row).next_after(d.due_at)
    claimed = await s.execute(
        update(CalendarEntryRow)
        .where(
            CalendarEntryRow.id == d.entry_id,
            CalendarEntryRow.status == SCHEDULED,
            CalendarEntryRow.next_due == d.due_at,
        )
        .values(
            next_due=nxt,
            status=SCHEDULED if nxt is not None else DONE,
            delivered=CalendarEntryRow.delivered + 1,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        return False
    seen = await s.scalar(
        select(CalendarOccurrenceRow.id).where(
            CalendarOccurrenceRow.entry_id == d.entry_id, CalendarOccurrenceRow.due_at == d.due_at
        )
    )
    if seen is not None:  # delivered before (cannot happen while the claim holds)
        return False
    late = (now - d.due_at) > timedelta(seconds=settings.calendar_late_after_s)
    occurrence = CalendarOccurrenceRow(
        entry_id=d.entry_id, due_at=d.due_at, delivered_at=now, late=late
    )
    error = await _send(s, settings, row, d, now, late, occurrence)
    if error is not None:
        occurrence.error = error
        await s.execute(
            update(CalendarEntryRow)
            .where(CalendarEntryRow.id == d.entry_id)
            .values(
                status=FAILED,
                next_due=d.due_at,
                delivered=CalendarEntryRow.delivered - 1,  # counted by the claim; not sent
                last_error=error,
                updated_at=now,
            )
            .execution_options(synchronize_session=False)
        )
    s.add(occurrence)
    await s.flush()
    return error is None


async def _send(
    s: AsyncSession,
    settings: Settings,
    row: CalendarEntryRow,
    d: Due,
    now: datetime,
    late: bool,
    occurrence: CalendarOccurrenceRow,
) -> str | None:
    """Send the occurrence's mail as its creator, in a savepoint; the refusal's
    message if it could not be sent (the budget, a deleted recipient, ...)."""
    sender = await _sender(s, row)
    if sender is None:
        return f"'{row.created_by}' no longer exists"
    ids = list(
        await s.scalars(
            select(CalendarAttachmentRow.attachment_id)
            .where(CalendarAttachmentRow.entry_id == row.id)
            .order_by(CalendarAttachmentRow.position)
        )
    )
    body = row.body + (late_note(row, d.due_at, now) if late else "")
    try:
        async with s.begin_nested():
            result = await mail.send_mail(
                s,
                settings,
                sender,
                to=list(row.to),
                cc=list(row.cc),
                subject=row.subject,
                body=body,
                permission_mode=row.permission_mode,
                from_session_id=row.from_session_id,
                type_=MailType.CALENDAR,
                attachment_ids=ids,
            )
    except DomainError as e:
        return e.message
    if isinstance(result, Sent):
        occurrence.mail_id = result.mail.id
    return None
