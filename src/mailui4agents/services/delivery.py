"""Delivery: store one mail and tell each recipient (one `new_mail` event each).

Mail, permissions and sessions all deliver (a sent mail, a request's mail, a
decision's receipt, an interactive session's first mail); this module depends
only on tables, attachments' linking, the event log and wire_shapes, so none of them
imports another to deliver.

Every write here is a Core statement built once at import (the mail, its
recipients, the session's `last_mail_at`, the events): the ORM's unit of work
cost more CPU per send than the statements themselves (bench/server.py), and the
rows handed back are plain values, known without reading anything back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from mailui4agents import metrics
from mailui4agents.db.base import new_id
from mailui4agents.db.engine import InSession
from mailui4agents.db.tables import AttachmentRow, MailRow, RecipientRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.mail_types import MailType, Recipient
from mailui4agents.events import log
from mailui4agents.services import attachments
from mailui4agents.services.principals import principal_key
from mailui4agents.services.wire_shapes import MailContext, delivery_fields
from mailui4agents.wire.events import EventType

_SESSIONS = cast(Table, SessionRow.__table__)
_INSERT_MAIL = insert(cast(Table, MailRow.__table__))
_INSERT_RECIPIENTS = insert(cast(Table, RecipientRow.__table__)).inline()  # no ids back
_TOUCH_SESSION = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("b_id"))
    .values(last_mail_at=bindparam("b_at"))
)


@InSession
def deliver(
    s: Session,
    session: SessionRow,
    *,
    sender: str,
    sender_human: bool,
    recipients: Sequence[Recipient],
    subject: str,
    body: str,
    type_: MailType,
    parent_mail_id: str | None = None,
    relay: bool = False,
    relay_key: str | None = None,
    from_session_id: str | None = None,
    files: Sequence[AttachmentRow] = (),
    mail_id: str | None = None,
    also: Sequence[log.Event] = (),
) -> MailContext:
    """Store one mail in `session` for its recipients, and one
    `new_mail` event per recipient, each with its own reply/self addresses.
    `files` must have been checked (attachments.check_for_send) by the caller.
    `mail_id`: the new mail's id, when the caller needed it before (a permission
    request names its mail); `also`: further events, appended after the mail's
    in the same statement.

    Awaited with an AsyncSession: its statements run in one greenlet, through
    the session's Connection (db/engine.InSession; bench/server.py measures the
    requests that deliver: a send, a permission request, a decision)."""
    # What the caller changed through the ORM is written first, as before: the
    # statements below do not flush it.
    if s.new or s.dirty or s.deleted:
        s.flush()
    conn = s.connection()
    now = utcnow()
    values = {
        "id": mail_id or new_id(),
        "session_id": session.id,
        "from_name": sender,
        "from_human": sender_human,
        "subject": subject,
        "body": body,
        "parent_mail_id": parent_mail_id,
        "type": type_,
        "relay": relay,
        "relay_key": relay_key,
        "from_session_id": from_session_id,
        "created_at": now,
    }
    inserted = conn.execute(_INSERT_MAIL, values)
    key = inserted.inserted_primary_key
    assert key is not None  # a single-row insert
    mail = MailRow(seq=key[0], **values)
    metrics.note(s, "mails", str(type_))
    # One statement for all recipients: row by row, a mail to 100 recipients
    # made 100 round trips inside the one write transaction. Nothing is read
    # back: the rows are what was written (ids are never shown).
    written = [
        {
            "mail_seq": mail.seq,
            "session_id": session.id,
            "name": n,
            "is_human": h,
            "role": role,
            "position": i,
        }
        for i, (n, h, role) in enumerate(recipients)
    ]
    conn.execute(_INSERT_RECIPIENTS, written)
    rows = [RecipientRow(**values, read_at=None) for values in written]
    if files:
        attachments.link(s, mail.seq, files)
        s.flush()
    conn.execute(_TOUCH_SESSION, {"b_id": session.id, "b_at": now})
    set_committed_value(session, "last_mail_at", now)  # written above, not dirty
    ctx = MailContext(mail, session, rows, list(files))
    events: list[log.Event] = [
        (principal_key(r.name, r.is_human), EventType.NEW_MAIL, delivery_fields(ctx, r.name))
        for r in rows
    ]
    log.append_rows.sync(s, [*events, *also])
    return ctx
