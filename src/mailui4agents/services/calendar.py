"""Calendar entries: mail to send later, once or recurring (docs/behaviour.md#calendar).

Create, edit, cancel and list; who may do what is decided in services/access.py.
Everything is validated before anything is written, on create and on update
alike: recipients exist, attachments are the creator's to send, the schedule
parses and stays within the limits (docs/limits.md). Delivery is in
services/calendar_due.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import (
    AttachmentRow,
    CalendarAttachmentRow,
    CalendarEntryRow,
    CalendarOccurrenceRow,
)
from mailui4agents.db.types import utcnow
from mailui4agents.domain import recurrence
from mailui4agents.domain.errors import Conflict, Forbidden, Invalid, not_found
from mailui4agents.services import access, attachments, mail, size_limits, tasking
from mailui4agents.services.principals import Principal
from mailui4agents.services.wire_shapes import attachment_out
from mailui4agents.settings import Settings
from mailui4agents.wire.calendar import CalendarEntryOut, OccurrenceOut

SCHEDULED, DONE, CANCELLED, FAILED = "scheduled", "done", "cancelled", "failed"
STATUSES = (SCHEDULED, DONE, CANCELLED, FAILED)
#: What a caller may set: done and failed are the scheduler's to say.
SETTABLE = (SCHEDULED, CANCELLED)
UPCOMING_SHOWN = 5
OCCURRENCES_SHOWN = 50


def limits_of(settings: Settings) -> recurrence.Limits:
    return recurrence.Limits(
        horizon=timedelta(days=settings.calendar_horizon_days),
        max_occurrences=settings.calendar_max_occurrences,
        min_gap=timedelta(seconds=settings.calendar_min_gap_s),
    )


def parse_start(text: str, field: str = "start_at") -> datetime:
    """ISO 8601 with or without an offset ("2026-03-29T09:00", "…+02:00", "…Z").
    Without one it is wall-clock time in the entry's time zone."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(
            field, f"'{text}' is not an ISO 8601 date and time such as 2026-03-29T09:00"
        ) from None


def schedule_of(row: CalendarEntryRow) -> recurrence.Schedule:
    tz = recurrence.zone(row.timezone)
    return recurrence.Schedule(datetime.fromisoformat(row.start_local), tz, row.rrule)


@dataclass
class Draft:
    """What an entry will be, from a create or from an entry plus a patch."""

    to: list[str]
    cc: list[str]
    subject: str
    body: str
    start_at: str
    timezone: str
    rrule: str | None
    attachment_ids: list[str]
    permission_mode: str | None = None
    from_session_id: str | None = None


async def _check(
    s: AsyncSession,
    settings: Settings,
    who: Principal,
    d: Draft,
    now: datetime,
    *,
    new: bool = True,
) -> tuple[recurrence.Schedule, datetime, list[AttachmentRow]]:
    """Validate a draft (Invalid names the field); the schedule, its next due
    time and the attachment rows, in order. `new`: the start or the rule is new
    (recurrence.schedule's `new_start`)."""
    size_limits.check_mail(settings, d.subject, d.body)
    rcpt = await mail.resolve_recipients(s, settings, d.to, d.cc)
    if who.kind == "agent" and d.permission_mode is not None:
        raise Invalid("permission_mode", "humans choose permission modes; agents leave it out")
    if who.kind == "user" and d.from_session_id is not None:
        raise Invalid("from_session_id", "only agents name the session they work in")
    size_limits.check_count("attachment_ids", d.attachment_ids, settings.max_recipients)
    scope = await access.reader(s, who, d.from_session_id)
    files = await attachments.check_for_send(s, scope, d.attachment_ids)
    sched = recurrence.schedule(
        parse_start(d.start_at), d.timezone, d.rrule, limits_of(settings), now, new_start=new
    )
    nxt = sched.next_after(now - timedelta(seconds=60))
    assert nxt is not None  # schedule() refuses a schedule without one
    # Who may set the agents to work (docs/access.md): refused now, not at each
    # delivery (which checks again); after the checks of the input itself.
    await tasking.check_draft(
        s, who, rcpt.to, rcpt.cc, rcpt.human, d.permission_mode, d.from_session_id
    )
    return sched, nxt, files


async def _check_cap(s: AsyncSession, settings: Settings, who: Principal) -> None:
    n = await s.scalar(
        select(func.count(CalendarEntryRow.id)).where(
            CalendarEntryRow.created_by == who.name, CalendarEntryRow.status == SCHEDULED
        )
    )
    if int(n or 0) >= settings.calendar_max_entries:
        raise Conflict(
            f"'{who.name}' has {settings.calendar_max_entries} scheduled entries, the most "
            "allowed; cancel one first",
            code="too_many_entries",
            limit=settings.calendar_max_entries,
        )


def _link(s: AsyncSession, entry_id: str, files: Sequence[AttachmentRow]) -> None:
    s.add_all(
        CalendarAttachmentRow(entry_id=entry_id, attachment_id=f.id, position=i)
        for i, f in enumerate(files)
    )


async def create(s: AsyncSession, settings: Settings, who: Principal, d: Draft) -> CalendarEntryOut:
    """A new scheduled entry (inside a write transaction)."""
    now = utcnow()
    sched, nxt, files = await _check(s, settings, who, d, now)
    await _check_cap(s, settings, who)
    row = CalendarEntryRow(
        created_by=who.name,
        creator_kind=who.kind,
        to=list(d.to),
        cc=list(d.cc),
        subject=d.subject,
        body=d.body,
        from_session_id=d.from_session_id,
        permission_mode=d.permission_mode,
        start_local=sched.start.isoformat(),
        timezone=d.timezone,
        rrule=sched.rule,
        status=SCHEDULED,
        next_due=nxt,
        delivered=0,
        created_at=now,
        updated_at=now,
    )
    s.add(row)
    await s.flush()
    _link(s, row.id, files)
    await s.flush()
    return await entry_out(s, row)


async def _visible(s: AsyncSession, who: Principal, entry_id: str) -> CalendarEntryRow:
    row = await s.get(CalendarEntryRow, entry_id)
    if row is None or not access.can_see_entry(who, row.created_by):
        raise not_found(f"calendar entry '{entry_id}'")
    return row


async def get(s: AsyncSession, who: Principal, entry_id: str) -> CalendarEntryOut:
    row = await _visible(s, who, entry_id)
    return await entry_out(s, row, with_occurrences=True)


async def _attachment_ids(s: AsyncSession, entry_id: str) -> list[str]:
    rows = await s.scalars(
        select(CalendarAttachmentRow.attachment_id)
        .where(CalendarAttachmentRow.entry_id == entry_id)
        .order_by(CalendarAttachmentRow.position)
    )
    return list(rows)


async def update(
    s: AsyncSession, settings: Settings, who: Principal, entry_id: str, changes: dict[str, Any]
) -> CalendarEntryOut:
    """Apply a patch (only the fields given). The whole entry is re-validated as
    it would be created; a new schedule starts counting from now. A done or
    cancelled entry is final (409)."""
    row = await _visible(s, who, entry_id)
    status = changes.pop("status", None)
    if status is not None and status not in SETTABLE:
        raise Invalid("status", f"status may be set to {' or '.join(SETTABLE)} only")
    if status == CANCELLED and not changes:
        return await cancel(s, who, entry_id)
    if not access.can_edit_entry(who, row.created_by):
        raise Forbidden("only its creator edits a calendar entry; an admin may cancel it")
    if row.status in (DONE, CANCELLED):
        raise Conflict(f"the entry is {row.status}; create a new one", reason="final")
    old_ids = await _attachment_ids(s, row.id)
    d = Draft(
        to=changes.get("to", row.to),
        cc=changes.get("cc", row.cc),
        subject=changes.get("subject", row.subject),
        body=changes.get("body", row.body),
        start_at=changes.get("start_at", row.start_local),
        timezone=changes.get("timezone", row.timezone),
        rrule=changes.get("rrule", row.rrule),
        attachment_ids=changes.get("attachment_ids", old_ids),
        permission_mode=changes.get("permission_mode", row.permission_mode),
        from_session_id=changes.get("from_session_id", row.from_session_id),
    )
    now = utcnow()
    fresh = "start_at" in changes or "rrule" in changes
    sched, _, files = await _check(s, settings, who, d, now, new=fresh)
    # Never an occurrence already delivered: a minute's slack must not repeat one.
    last = await s.scalar(
        select(func.max(CalendarOccurrenceRow.due_at)).where(
            CalendarOccurrenceRow.entry_id == row.id
        )
    )
    after = now - timedelta(seconds=60)
    nxt = sched.next_after(max(after, last) if last is not None else after)
    was = row.status
    new = CANCELLED if status == CANCELLED else SCHEDULED  # editing a failed entry retries it
    if new == SCHEDULED and nxt is None:
        raise Invalid("start_at", "the schedule has no occurrence left after the last delivered")
    if new == SCHEDULED and was != SCHEDULED:
        await _check_cap(s, settings, who)
    row.status = new
    if new == SCHEDULED:
        row.last_error = None
        # A new next_due makes any claim the scheduler computed from the old one fail.
        row.next_due = nxt
    row.to, row.cc, row.subject, row.body = list(d.to), list(d.cc), d.subject, d.body
    row.start_local, row.timezone, row.rrule = sched.start.isoformat(), d.timezone, sched.rule
    row.permission_mode, row.from_session_id = d.permission_mode, d.from_session_id
    row.updated_at = now
    if [f.id for f in files] != old_ids:
        await s.execute(
            delete(CalendarAttachmentRow).where(CalendarAttachmentRow.entry_id == row.id)
        )
        _link(s, row.id, files)
    await s.flush()
    return await entry_out(s, row, with_occurrences=True)


async def cancel(s: AsyncSession, who: Principal, entry_id: str) -> CalendarEntryOut:
    """Cancel (idempotent). Done entries stay done (409)."""
    row = await _visible(s, who, entry_id)
    if not access.can_cancel_entry(who, row.created_by):
        raise not_found(f"calendar entry '{entry_id}'")
    if row.status == DONE:
        raise Conflict("the entry is done: every occurrence was delivered", reason="final")
    if row.status != CANCELLED:
        row.status = CANCELLED
        row.updated_at = utcnow()
        await s.flush()
    return await entry_out(s, row, with_occurrences=True)


async def list_entries(
    s: AsyncSession,
    who: Principal,
    *,
    status: str | None,
    everyone: bool,
    limit: int,
    cursor: str | None,
) -> tuple[list[CalendarEntryOut], str | None]:
    """The caller's entries (an admin's `everyone`: all), upcoming first: scheduled
    ones by next due time, then the rest newest first. The cursor is an offset."""
    if everyone and not (who.is_human and who.is_admin):
        raise Invalid("everyone", "only admins list everyone's entries")
    if status is not None and status not in STATUSES:
        raise Invalid("status", f"status is one of {', '.join(STATUSES)}")
    try:
        offset = int(cursor) if cursor else 0
    except ValueError:
        offset = -1
    if not 0 <= offset < 2**31:
        raise Invalid("cursor", "cursor is not one this server gave out")
    stmt = select(CalendarEntryRow)
    if not everyone:
        stmt = stmt.where(CalendarEntryRow.created_by == who.name)
    if status is not None:
        stmt = stmt.where(CalendarEntryRow.status == status)
    stmt = stmt.order_by(
        (CalendarEntryRow.status != SCHEDULED),
        CalendarEntryRow.next_due,
        CalendarEntryRow.created_at.desc(),
        CalendarEntryRow.id,
    )
    rows = list((await s.scalars(stmt.offset(offset).limit(limit + 1))).all())
    more = len(rows) > limit
    items = [await entry_out(s, r) for r in rows[:limit]]
    return items, (str(offset + limit) if more else None)


async def entry_out(
    s: AsyncSession, row: CalendarEntryRow, *, with_occurrences: bool = False
) -> CalendarEntryOut:
    """An entry as the API returns it: its start as local time with its offset,
    the next few occurrences in UTC, and (on reads of one entry) what was delivered."""
    sched = schedule_of(row)
    atts = await s.scalars(
        select(AttachmentRow)
        .join(CalendarAttachmentRow, CalendarAttachmentRow.attachment_id == AttachmentRow.id)
        .where(CalendarAttachmentRow.entry_id == row.id)
        .order_by(CalendarAttachmentRow.position)
    )
    upcoming: list[datetime] = []
    if row.status == SCHEDULED and row.next_due is not None:
        upcoming = [row.next_due]
        at: datetime | None = row.next_due
        while len(upcoming) < UPCOMING_SHOWN and at is not None:
            at = sched.next_after(at)
            if at is not None:
                upcoming.append(at)
    occurrences: list[OccurrenceOut] | None = None
    if with_occurrences:
        occ = await s.scalars(
            select(CalendarOccurrenceRow)
            .where(CalendarOccurrenceRow.entry_id == row.id)
            .order_by(CalendarOccurrenceRow.due_at.desc())
            .limit(OCCURRENCES_SHOWN)
        )
        occurrences = [occurrence_out(o) for o in occ]
    return CalendarEntryOut(
        id=row.id,
        created_by=row.created_by,
        to=list(row.to),
        cc=list(row.cc),
        subject=row.subject,
        body=row.body,
        attachments=[attachment_out(a) for a in atts],
        start_at=sched.start.replace(tzinfo=sched.tz).isoformat(),
        timezone=row.timezone,
        rrule=row.rrule,
        status=row.status,
        next_due=row.next_due if row.status == SCHEDULED else None,
        upcoming=upcoming,
        delivered=row.delivered,
        last_error=row.last_error,
        permission_mode=row.permission_mode,
        from_session_id=row.from_session_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        occurrences=occurrences,
    )


def occurrence_out(o: CalendarOccurrenceRow) -> OccurrenceOut:
    return OccurrenceOut(
        due_at=o.due_at, delivered_at=o.delivered_at, late=o.late, mail_id=o.mail_id, error=o.error
    )
