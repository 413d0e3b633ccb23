"""A person's notification policy: which channels, what a push may show, not while
one of their pages is visible, quiet hours, a reminder, escalation to the other
deciders (docs/remote.md, "Notification policy"). The rules are in
domain/notify_policy.py; this module reads and writes them.

services/push.py asks `first_push` whom to push when a request opens; the
scheduler's reminder/escalation pass is services/notify_due.py (it calls
services/push.py, which imports this module: kept apart, no import cycle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict, cast

from sqlalchemy import Table, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import NotifyPolicyRow
from mailui4agents.db.tables import SessionDeciderRow, UserRow
from mailui4agents.domain import notify_policy as rules
from mailui4agents.domain.notify_policy import DECIDER, SETTABLE, Decider
from mailui4agents.domain.notify_policy import Policy as Policy
from mailui4agents.services import access
from mailui4agents.services.principals import Principal

# Presence (POST /api/v1/me/presence): a visible page says so every 30 s
# (static/app.js); a beacon counts for VISIBLE_FOR_S, so one late beacon leaves
# no gap. It is written only when what is stored runs out within
# VISIBLE_REFRESH_S: however many tabs beat, at most one write per 15 s.
VISIBLE_FOR_S = 45.0
VISIBLE_REFRESH_S = 30.0

_POLICIES = cast(Table, NotifyPolicyRow.__table__)


def _policy(row: NotifyPolicyRow) -> Policy:
    return Policy(
        push=row.push,
        email=row.email,
        email_mail=row.email_mail,
        push_content=row.push_content,
        skip_when_visible=row.skip_when_visible,
        quiet_start=row.quiet_start,
        quiet_end=row.quiet_end,
        timezone=row.timezone,
        remind_after_min=row.remind_after_min,
        escalate_after_min=row.escalate_after_min,
        email_digest_hour=row.email_digest_hour,
        visible_until=row.visible_until,
    )


async def policies(s: AsyncSession, names: Iterable[str]) -> dict[str, Policy]:
    """Each named person's policy (defaults for those without a row)."""
    wanted = list(dict.fromkeys(names))
    out = {name: Policy() for name in wanted}
    if not wanted:
        return out
    rows = await s.execute(
        select(UserRow.username, NotifyPolicyRow)
        .join(NotifyPolicyRow, NotifyPolicyRow.user_id == UserRow.id)
        .where(UserRow.username.in_(wanted))
    )
    for name, row in rows.all():
        out[name] = _policy(row)
    return out


async def deciders_of(s: AsyncSession, session_ids: Iterable[str]) -> dict[str, list[Decider]]:
    """Each session's deciders, owners first, with their roles and policies (one
    query: a request's opening pays one read for this)."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    rows = await s.execute(
        access.deciders_stmt(
            ids, SessionDeciderRow.session_id, SessionDeciderRow.name, SessionDeciderRow.role
        )
        .add_columns(NotifyPolicyRow)
        .outerjoin(UserRow, UserRow.username == SessionDeciderRow.name)
        .outerjoin(NotifyPolicyRow, NotifyPolicyRow.user_id == UserRow.id)
    )
    out: dict[str, list[Decider]] = {sid: [] for sid in ids}
    for sid, name, role, row in rows.all():
        out[sid].append(Decider(name, role, Policy() if row is None else _policy(row)))
    return out


async def first_push(
    s: AsyncSession, session_id: str, deciders: Sequence[str], now: datetime
) -> dict[str, Policy]:
    """Those of `deciders` to push as a request of the session opens at `now`,
    with their policies (domain/notify_policy.first_wave): not those whose push
    is off, who are in quiet hours or looking at a page, nor the non-owner
    deciders an owner holds back for escalation. The hold is worked out from all
    the session's deciders, whoever of them the caller passes (services/push.py
    passes those with a subscribed device), exactly as the scheduler's
    escalation does (services/notify_due.py): so an owner without a device
    still holds the others back, and nobody is pushed twice. `deciders` keeps
    its order; a name the session does not list counts as a decider."""
    everyone = (await deciders_of(s, [session_id])).get(session_id, [])
    known = {d.name for d in everyone}
    missing = await policies(s, [n for n in deciders if n not in known])
    everyone += [Decider(n, DECIDER, p) for n, p in missing.items()]
    wave = {d.name: d.policy for d in rules.first_wave(everyone, now)}
    return {n: wave[n] for n in dict.fromkeys(deciders) if n in wave}


# --- a person's own policy ---------------------------------------------------


async def get_policy(s: AsyncSession, who: Principal) -> Policy:
    row = await s.get(NotifyPolicyRow, who.id)
    return Policy() if row is None else _policy(row)


def _upsert(s: AsyncSession, values: Mapping[str, object], changed: Iterable[str]) -> Any:
    """INSERT the whole row, or on a row already there (made meanwhile by another
    request: PostgreSQL READ COMMITTED, or an earlier commit) UPDATE only the
    `changed` columns: two tabs changing different fields both stick, and
    neither of two first writes fails on the primary key."""
    dialect = s.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    stmt = insert(_POLICIES).values(**values)
    keep = {name: stmt.excluded[name] for name in changed}
    return stmt.on_conflict_do_update(index_elements=["user_id"], set_=keep)


async def set_policy(
    s: AsyncSession, who: Principal, changes: Mapping[str, object], now: datetime
) -> Policy:
    """Apply a partial update (only the fields in `changes`) to `who`'s policy:
    Invalid naming the field when a value, or the result, is not allowed."""
    current = await get_policy(s, who)
    new = rules.updated(current, dict(changes))
    values: dict[str, object] = {name: getattr(new, name) for name in SETTABLE}
    values.update(user_id=who.id, visible_until=current.visible_until, updated_at=now)
    await s.execute(_upsert(s, values, [*changes, "updated_at"]))
    row = await s.get(NotifyPolicyRow, who.id, populate_existing=True)
    assert row is not None
    return _policy(row)


class PolicySettings(TypedDict):
    """The fields a person sets (domain/notify_policy.SETTABLE; not the presence
    beacon): what PUT /api/v1/me/notify-policy answers (NotifyPolicyOut)."""

    push: bool
    email: bool
    email_mail: bool
    push_content: str
    skip_when_visible: bool
    quiet_start: str | None
    quiet_end: str | None
    timezone: str
    remind_after_min: int | None
    escalate_after_min: int | None
    email_digest_hour: int | None


def as_dict(p: Policy) -> PolicySettings:
    """The fields a person sets (not the presence beacon)."""
    return PolicySettings(
        push=p.push,
        email=p.email,
        email_mail=p.email_mail,
        push_content=p.push_content,
        skip_when_visible=p.skip_when_visible,
        quiet_start=p.quiet_start,
        quiet_end=p.quiet_end,
        timezone=p.timezone,
        remind_after_min=p.remind_after_min,
        escalate_after_min=p.escalate_after_min,
        email_digest_hour=p.email_digest_hour,
    )


# --- presence ------------------------------------------------------------------


async def visible_until(s: AsyncSession, who: Principal) -> datetime | None:
    until: datetime | None = await s.scalar(
        select(NotifyPolicyRow.visible_until).where(NotifyPolicyRow.user_id == who.id)
    )
    return until


def presence_write_needed(stored: datetime | None, visible: bool, now: datetime) -> bool:
    """Whether a beacon changes anything worth a write (`stored` read in a read
    transaction first, so a page's beacons rarely take the write lock)."""
    if not visible:
        return stored is not None
    return stored is None or stored <= now + timedelta(seconds=VISIBLE_REFRESH_S)


async def set_presence(
    s: AsyncSession, who: Principal, visible: bool, now: datetime
) -> datetime | None:
    """Record that one of `who`'s pages is visible (until now + VISIBLE_FOR_S)
    or no longer is; returns the stored visible_until."""
    until = now + timedelta(seconds=VISIBLE_FOR_S) if visible else None
    if until is None:
        await s.execute(
            update(NotifyPolicyRow)
            .where(NotifyPolicyRow.user_id == who.id)
            .values(visible_until=None)
        )
        return None
    values = {name: getattr(Policy(), name) for name in SETTABLE}
    values.update(user_id=who.id, visible_until=until, updated_at=now)
    # Only the beacon: the person's settings (or their defaults) stay as they are.
    await s.execute(_upsert(s, values, ["visible_until"]))
    return until
