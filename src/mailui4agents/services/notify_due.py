"""Reminders and escalations of unanswered requests (docs/remote.md,
"Notification policy"): the scheduler's "notify" job (services/scheduler.py).

A pass reads the pending requests old enough for something to be due, and asks
domain/notify_policy.py what is due for each (`plan`). Each due step is then
claimed in its own write transaction by a conditional UPDATE of the request
(`claim`) and pushed in that same transaction (`send`: services/push.py writes
its outbox there; the pushes go out after the commit). A claim that finds the
request decided, or the step claimed by another pass, changes no row and sends
nothing; a failed push rolls the claim back, so the next pass retries it.

- escalation: `escalated_at IS NULL` -> now; once per request.
- reminder: `reminded_at` is a mark, "every reminder due up to here was
  handled". A step holds the people whose reminder time lies after the mark it
  read; it is claimed only if the stored mark is still before the earliest of
  those times (`reminded_at IS NULL OR reminded_at < after`), and sets the mark
  to now. Whoever read a stale mark finds it moved past their people: two
  passes racing send each person's reminder once. People in quiet hours, with
  a visible page or push off at that moment are skipped (logged, counted), not
  postponed.

This module imports services/push.py, which imports services/notify_policy.py:
the pass cannot live there without an import cycle."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.domain import notify_policy as rules
from mailui4agents.domain.notify_policy import MAX_MINUTES, MIN_MINUTES, Policy, Step
from mailui4agents.services import notify_policy, push

log = logging.getLogger("mailui4agents.notify")

# Nothing is due before MIN_MINUTES nor after MAX_MINUTES; the slack lets a pass
# that ran late (a gateway down for a while) still send what fell due meanwhile.
_YOUNGEST = timedelta(minutes=MIN_MINUTES)
_OLDEST = timedelta(minutes=MAX_MINUTES, hours=1)
PER_PASS = 200  # requests looked at per pass; the rest wait for the next one

# push.queue_request(s, row, session, people, kind=...) -> pushes queued.
Sender = Callable[
    [AsyncSession, PermissionRow, SessionRow, Mapping[str, Policy], str], Awaitable[int]
]


@dataclass(frozen=True, slots=True)
class Due:
    request_id: str
    step: Step


@dataclass(slots=True)
class Result:
    """What a pass did: steps claimed, pushes queued, people skipped."""

    claimed: int = 0
    pushed: int = 0
    skipped: int = 0


async def plan(s: AsyncSession, now: datetime, limit: int = PER_PASS) -> list[Due]:
    """The reminder/escalation steps due at `now` (read only; nothing claimed)."""
    rows = (
        await s.execute(
            select(
                PermissionRow.id,
                PermissionRow.session_id,
                PermissionRow.created_at,
                PermissionRow.reminded_at,
                PermissionRow.escalated_at,
            )
            .where(
                PermissionRow.status == "pending",
                PermissionRow.created_at <= now - _YOUNGEST,
                PermissionRow.created_at >= now - _OLDEST,
            )
            .order_by(PermissionRow.created_at)
            .limit(limit)
        )
    ).all()
    if not rows:
        return []
    deciders = await notify_policy.deciders_of(s, {r.session_id for r in rows})
    out: list[Due] = []
    for r in rows:
        people = deciders.get(r.session_id, [])
        for step in (
            rules.escalation_step(people, r.created_at, r.escalated_at, now),
            rules.reminder_step(people, r.created_at, r.reminded_at, now),
        ):
            if step is not None:
                out.append(Due(r.id, step))
    return out


async def claim(s: AsyncSession, due: Due) -> bool:
    """Take `due` for this transaction: True for exactly one claimer, and only
    while the request is pending."""
    free: ColumnElement[bool]
    if due.step.kind == "escalation":
        free = PermissionRow.escalated_at.is_(None)
        mark = {"escalated_at": due.step.mark}
    else:
        free = or_(PermissionRow.reminded_at.is_(None), PermissionRow.reminded_at < due.step.after)
        mark = {"reminded_at": due.step.mark}
    done = cast(
        CursorResult[tuple[()]],
        await s.execute(
            update(PermissionRow)
            .where(PermissionRow.id == due.request_id, PermissionRow.status == "pending", free)
            .values(**mark)
            .execution_options(synchronize_session=False)
        ),
    )
    return done.rowcount == 1


async def push_sender(
    s: AsyncSession,
    row: PermissionRow,
    session: SessionRow,
    people: Mapping[str, Policy],
    kind: str,
) -> int:
    """The real sender: services/push.py, in the claim's transaction."""
    return await push.queue_request(s, row, session, people, kind=kind)


async def send(s: AsyncSession, due: Due, sender: Sender = push_sender) -> int:
    """Push a claimed step to its people; returns how many pushes were queued."""
    for name, reason in due.step.skipped:
        log.info(
            "%s of request %s not pushed to %s: %s", due.step.kind, due.request_id, name, reason
        )
    people = {d.name: d.policy for d in due.step.to}
    if not people:
        return 0
    row = await s.get(PermissionRow, due.request_id)
    assert row is not None  # claimed in this transaction: it exists
    session = await s.get(SessionRow, row.session_id)
    assert session is not None
    return await sender(s, row, session, people, due.step.kind)
