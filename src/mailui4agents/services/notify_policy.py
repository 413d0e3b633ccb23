"""A person's notification policy: which channels, what a push may show, not while
one of their pages is visible, quiet hours, a reminder, escalation to the other
deciders (docs/remote.md, "Notification policy").

services/push.py asks `first_push` whom to push when a request opens; the
scheduler's reminder/escalation pass lives here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import NotifyPolicyRow, UserRow


@dataclass(frozen=True, slots=True)
class Policy:
    """One person's policy; the defaults are what a person without a row gets."""

    push: bool = True
    email: bool = True
    push_content: str = "preview"  # preview | none
    skip_when_visible: bool = True
    quiet_start: str | None = None
    quiet_end: str | None = None
    timezone: str = "UTC"
    remind_after_min: int | None = None
    escalate_after_min: int | None = None
    visible_until: datetime | None = None


async def policies(s: AsyncSession, names: Sequence[str]) -> dict[str, Policy]:
    """Each named person's policy (defaults for those without a row)."""
    out = {name: Policy() for name in names}
    if not names:
        return out
    rows = await s.execute(
        select(UserRow.username, NotifyPolicyRow)
        .join(NotifyPolicyRow, NotifyPolicyRow.user_id == UserRow.id)
        .where(UserRow.username.in_(list(names)))
    )
    for name, row in rows.all():
        out[name] = Policy(
            push=row.push,
            email=row.email,
            push_content=row.push_content,
            skip_when_visible=row.skip_when_visible,
            quiet_start=row.quiet_start,
            quiet_end=row.quiet_end,
            timezone=row.timezone,
            remind_after_min=row.remind_after_min,
            escalate_after_min=row.escalate_after_min,
            visible_until=row.visible_until,
        )
    return out


async def first_push(
    s: AsyncSession, session_id: str, deciders: Sequence[str], now: datetime
) -> dict[str, Policy]:
    """The deciders to push when a request opens, with their policies.

    (First version: every decider. Quiet hours, visible pages and escalation
    narrow this.)"""
    return await policies(s, deciders)
