"""Attachments: uploads, who may attach and download them, their links to mail.

An attachment may be used (attached, downloaded) by whoever uploaded it, and by
anyone who may read a mail that carries it (docs/access.md decides who may read;
an agent without a scope session may download what was attached to mail addressed
to it, and attach only its own uploads). Anyone else is told it does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from mailui4agents.db.tables import (
    AttachmentRow,
    MailAttachmentRow,
    MailRow,
    ReadLogRow,
    RecipientRow,
)
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import invalid_value, not_found
from mailui4agents.domain.uploads import safe_content_type, safe_filename
from mailui4agents.services import access, blobs
from mailui4agents.services.principals import Principal
from mailui4agents.services.wire_shapes import attachment_out
from mailui4agents.wire.models import AttachmentRef, JsonObject


async def create(
    s: AsyncSession,
    writer: blobs.BlobWriter,
    uploader: Principal,
    *,
    filename: str | None,
    content_type: str | None,
) -> AttachmentRef:
    """Store a finished upload as a new attachment (its bytes at most once)."""
    now = utcnow()
    blob = await blobs.put(s, writer, now)
    row = AttachmentRow(
        sha256=blob.sha256,
        name=safe_filename(filename),
        content_type=safe_content_type(content_type),
        size=blob.size,
        uploaded_by=uploader.name,
        created_at=now,
    )
    s.add(row)
    await s.flush()
    return attachment_out(row)


async def _granting_mail(
    s: AsyncSession, reader: access.Reader, att: AttachmentRow, *, to_me: bool
) -> tuple[str, str] | None:
    """(mail id, session id) of the first mail carrying `att` that `reader` may
    read, in one query. `to_me`: an unscoped agent's mails addressed to it count."""
    carrying = (
        select(MailRow.id, MailRow.session_id, MailRow.seq)
        .join(MailAttachmentRow, MailAttachmentRow.mail_seq == MailRow.seq)
        .where(MailAttachmentRow.attachment_id == att.id)
    )
    if reader.unscoped_agent and to_me:
        mine = select(RecipientRow.mail_seq).where(RecipientRow.name == reader.name)
        carrying = carrying.where(MailRow.seq.in_(mine))
    else:
        carrying = carrying.where(MailRow.session_id.in_(reader.readable_ids()))
    row = (await s.execute(carrying.order_by(MailRow.seq).limit(1))).first()
    return None if row is None else (row[0], row[1])


async def readable(s: AsyncSession, reader: access.Reader, attachment_id: str) -> AttachmentRow:
    """The attachment if `reader` may download it, else NotFound; the read is logged."""
    att = await s.get(AttachmentRow, attachment_id)
    via = None
    if att is not None and att.uploaded_by != reader.name:
        via = await _granting_mail(s, reader, att, to_me=True)
    if att is None or (via is None and att.uploaded_by != reader.name):
        raise not_found(f"attachment '{attachment_id}'")
    s.add(
        ReadLogRow(
            reader=reader.name,
            reader_kind=reader.principal.kind,
            mail_id=via[0] if via else None,
            session_id=via[1] if via else None,
            scope_session_id=reader.scope_id,
            action="attachment",
            at=utcnow(),
        )
    )
    return att


async def check_for_send(
    s: AsyncSession, sender: access.Reader, ids: Sequence[str]
) -> list[AttachmentRow]:
    """All of a mail's attachments, checked before the mail exists: each must
    exist, be listed once, and be the sender's own upload or readable by the
    sender through a mail it may read in its scope (a forward). An agent without
    a scope session attaches only its own uploads. Invalid names the first bad one."""
    if not ids:
        return []
    # Held FOR SHARE until the send commits (PostgreSQL; a no-op on SQLite): a
    # sweep skips locked attachments, and an attachment a sweep has just deleted
    # is waited for and then not found, a 400 below (services/blobs.py).
    found = await s.scalars(
        select(AttachmentRow)
        .where(AttachmentRow.id.in_(set(ids)))
        .with_for_update(read=True)
        .execution_options(populate_existing=True)
    )
    rows = {r.id: r for r in found}
    out: list[AttachmentRow] = []
    for i, aid in enumerate(ids):
        field = f"attachment_ids[{i}]"
        if aid in ids[:i]:
            raise invalid_value(field, f"attachment '{aid}' is listed more than once")
        row = rows.get(aid)
        if row is None or (
            row.uploaded_by != sender.name
            and await _granting_mail(s, sender, row, to_me=False) is None
        ):
            raise invalid_value(field, f"no attachment '{aid}' that you uploaded or may read")
        out.append(row)
    return out


def link(s: AsyncSession | Session, mail_seq: int, rows: Sequence[AttachmentRow]) -> None:
    """Reference `rows` from the mail, in the order given."""
    s.add_all(
        MailAttachmentRow(mail_seq=mail_seq, attachment_id=r.id, position=i)
        for i, r in enumerate(rows)
    )


def _of_mails(*columns: Any) -> Select[Any]:
    """`columns` of the attachments of the mails `seqs` (a parameter), each
    row led by its mail's seq, in each mail's order: one statement."""
    return (
        select(MailAttachmentRow.mail_seq, *columns)
        .join(AttachmentRow, AttachmentRow.id == MailAttachmentRow.attachment_id)
        .where(MailAttachmentRow.mail_seq.in_(bindparam("seqs", expanding=True)))
        .order_by(MailAttachmentRow.mail_seq, MailAttachmentRow.position)
    )


_ROWS_OF_MAILS = _of_mails(AttachmentRow)
_REFS_OF_MAILS = _of_mails(
    AttachmentRow.id,
    AttachmentRow.name,
    AttachmentRow.size,
    AttachmentRow.content_type,
    AttachmentRow.sha256,
)


async def for_mails(s: AsyncSession, seqs: Sequence[int]) -> dict[int, list[AttachmentRow]]:
    """The attachments of many mails in one query, in each mail's order."""
    out: dict[int, list[AttachmentRow]] = {seq: [] for seq in seqs}
    if not seqs:
        return out
    for seq, att in await s.execute(_ROWS_OF_MAILS, {"seqs": list(seqs)}):
        out[seq].append(att)
    return out


async def refs_for_mails(s: AsyncSession, seqs: Sequence[int]) -> dict[int, list[JsonObject]]:
    """The same as JSON objects, as a mail lists them (wire_shapes.attachment_out's
    AttachmentRef, key for key), without ORM objects: a page of mail's form.
    Mails without attachments are left out."""
    out: dict[int, list[JsonObject]] = {}
    if not seqs:
        return out
    found = await s.execute(_REFS_OF_MAILS, {"seqs": list(seqs)})
    for seq, att_id, name, size, content_type, sha256 in found:
        out.setdefault(seq, []).append(
            {
                "attachment_id": att_id,
                "name": name,
                "size": size,
                "content_type": content_type,
                "sha256": sha256,
            }
        )
    return out
