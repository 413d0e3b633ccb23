"""Delivery: store one mail and tell each recipient (one `new_mail` event each).

Mail, permissions and sessions all deliver (a sent mail, a request's mail, a
decision's receipt, an interactive session's first mail); this module depends
only on tables, attachments' linking, the event log and views, so none of them
imports another to deliver.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import AttachmentRow, MailRow, RecipientRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.events import log
from mailui4agents.services import attachments
from mailui4agents.services.principals import principal_key
from mailui4agents.services.views import MailContext, delivery_fields
from mailui4agents.wire.events import EventType


async def deliver(
    s: AsyncSession,
    session: SessionRow,
    sender: str,
    sender_human: bool,
    recipients: list[tuple[str, bool, str]],
    *,
    subject: str,
    body: str,
    type_: str,
    parent_mail_id: str | None = None,
    relay: bool = False,
    relay_key: str | None = None,
    from_session_id: str | None = None,
    files: Sequence[AttachmentRow] = (),
) -> MailContext:
    """Store one mail in `session` for (name, is_human, role) recipients, and one
    `new_mail` event per recipient, each with its own reply/self addresses.
    `files` must have been checked (attachments.check_for_send) by the caller."""
    now = utcnow()
    mail = MailRow(
        session_id=session.id,
        from_name=sender,
        from_human=sender_human,
        subject=subject,
        body=body,
        parent_mail_id=parent_mail_id,
        type=type_,
        relay=relay,
        relay_key=relay_key,
        from_session_id=from_session_id,
        created_at=now,
    )
    s.add(mail)
    await s.flush()
    # Core inserts, one statement each: row by row, a mail to 100 recipients made
    # 200 round trips inside the one write transaction.
    # RETURNING gives the rows back in the same statement (no re-read). Not
    # sort_by_parameter_order: on SQLite that falls back to one INSERT per row;
    # the rows are put in order (position = insertion order) here instead.
    rows = sorted(
        await s.scalars(
            insert(RecipientRow).returning(RecipientRow),
            [
                {
                    "mail_seq": mail.seq,
                    "session_id": session.id,
                    "name": n,
                    "is_human": h,
                    "role": role,
                    "position": i,
                }
                for i, (n, h, role) in enumerate(recipients)
            ],
        ),
        key=lambda r: r.position,
    )
    attachments.link(s, mail.seq, files)
    session.last_mail_at = now
    await s.flush()
    ctx = MailContext(mail, session, rows, list(files))
    events = [(principal_key(r.name, r.is_human), delivery_fields(ctx, r.name)) for r in rows]
    await log.append_each(s, EventType.NEW_MAIL, events)
    return ctx
