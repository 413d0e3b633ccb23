"""A session as one viewer sees it (SessionOut with its unread and pending
counts), and who is told about its changes.

It may count mails and permission requests without importing the services that
write them: everything here reads tables, so mail, permissions and sessions all
import it and none of them imports another to describe a session.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, PermissionRow, RecipientRow, SessionRow
from mailui4agents.domain.errors import not_found
from mailui4agents.services import access
from mailui4agents.services.principals import principal_key
from mailui4agents.services.wire_shapes import session_out
from mailui4agents.wire.models import SessionOut


async def get_session(s: AsyncSession, session_id: str) -> SessionRow:
    row = await s.get(SessionRow, session_id)
    if row is None:
        raise not_found(f"session '{session_id}'")
    return row


async def pending_count(s: AsyncSession, session_id: str) -> int:
    n = await s.scalar(
        select(func.count(PermissionRow.id)).where(
            PermissionRow.session_id == session_id, PermissionRow.status == "pending"
        )
    )
    return int(n or 0)


async def unread_count(s: AsyncSession, session_id: str, viewer: str) -> int:
    n = await s.scalar(
        select(func.count(RecipientRow.id))
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .where(
            MailRow.session_id == session_id,
            RecipientRow.name == viewer,
            RecipientRow.read_at.is_(None),
        )
    )
    return int(n or 0)


async def describe(s: AsyncSession, row: SessionRow, viewer: str) -> SessionOut:
    """SessionOut as `viewer` sees it (its unread count)."""
    return (await describe_many(s, [row], viewer))[0]


async def describe_many(
    s: AsyncSession, rows: Sequence[SessionRow], viewer: str
) -> list[SessionOut]:
    """:func:`describe` for each of `rows`, in four queries whatever their number
    (one per row and kind made a page of 50 sessions cost 200)."""
    if not rows:
        return []
    ids = [r.id for r in rows]
    people = await access.participants_of(s, ids)
    unread = await _counts(
        s,
        select(MailRow.session_id, func.count(RecipientRow.id))
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .where(
            MailRow.session_id.in_(ids),
            RecipientRow.name == viewer,
            RecipientRow.read_at.is_(None),
        )
        .group_by(MailRow.session_id),
    )
    pending = await _counts(
        s,
        select(PermissionRow.session_id, func.count(PermissionRow.id))
        .where(PermissionRow.session_id.in_(ids), PermissionRow.status == "pending")
        .group_by(PermissionRow.session_id),
    )
    deciders = await access.deciders_of(s, ids)
    return [
        session_out(
            r,
            [n for n, _ in people[r.id]],
            unread.get(r.id, 0),
            pending.get(r.id, 0),
            deciders[r.id],
        )
        for r in rows
    ]


async def _counts(s: AsyncSession, stmt: Select[str, int]) -> dict[str, int]:
    return {sid: int(n) for sid, n in await s.execute(stmt)}


async def audience(s: AsyncSession, session_id: str) -> list[str]:
    """The event-log keys of everyone told about a session's changes: its
    participants and its deciders."""
    keys = {principal_key(n, h) for n, h in await access.participants(s, session_id)}
    keys.update(principal_key(n, True) for n in await access.deciders(s, session_id))
    return sorted(keys)
