"""A session exported as real mail (docs/email.md, "Export"): every mail of the
session, oldest first, as the RFC 5322 message services/email_mail.build makes
of it, the builder the e-mails of agents' mails use; so an exported thread has
the Message-IDs, In-Reply-To and References of the e-mails sent.

- Who: a person who may read the session (services/access.Reader.can_read: its
  members, admins); anyone else gets 404, as for the session itself. Each mail
  read is logged (action `export`), as a thread read is.
- A request's input only for those who see it in the web UI
  (services/request_input.py): others get the same words the thread shows.
- Attachments in full as MIME parts: an export is the person's own copy, not
  an e-mail through relays with a size cap; each is bounded by
  attachment_max_bytes already. A file whose blob is gone is named, with a link.
- Read PAGE mails at a time, one transaction each, then the files outside it;
  the answer streams message by message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import anyio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, RecipientRow, SessionRow
from mailui4agents.domain.errors import not_found
from mailui4agents.services import access, attachments, email_mail, reading, request_input
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway

log = logging.getLogger("mailui4agents.email")

PAGE = 100
FORMATS = ("mbox",)


async def check(gw: Gateway, who: Principal, session_id: str) -> None:
    """NotFound unless `who` may read the session (before anything streams)."""
    async with gw.read() as s:
        session = await s.get(SessionRow, session_id)
        if session is None:
            raise not_found(f"session '{session_id}'")
        await access.Reader(who).ensure_read(s, session, f"session '{session_id}'")


async def _page(
    s: AsyncSession, who: Principal, session: SessionRow, after: int, parents: dict[str, str | None]
) -> tuple[list[email_mail.ThreadMail], int | None]:
    """Up to PAGE mails after seq `after`, as the builder reads them; the last
    seq (None: no more). `parents` (id → parent id) grows with each page."""
    mails = list(
        await s.scalars(
            select(MailRow)
            .where(MailRow.session_id == session.id, MailRow.seq > after)
            .order_by(MailRow.seq)
            .limit(PAGE)
        )
    )
    if not mails:
        return [], None
    seqs = [m.seq for m in mails]
    people: dict[int, list[RecipientRow]] = {seq: [] for seq in seqs}
    for r in await s.scalars(
        select(RecipientRow)
        .where(RecipientRow.mail_seq.in_(seqs))
        .order_by(RecipientRow.mail_seq, RecipientRow.position)
    ):
        people[r.mail_seq].append(r)
    files = await attachments.for_mails(s, seqs)
    heads = [
        request_input.MailHead(m.id, m.session_id, m.type, m.from_name, m.from_human) for m in mails
    ]
    hidden = await request_input.hidden(s, who, heads)
    await reading.record_reads(s, who, seqs, None, "export")
    out = []
    for m in mails:
        parents[m.id] = m.parent_mail_id
        if m.parent_mail_id is None or m.parent_mail_id in parents:
            chain = email_mail.chain_in(parents, m.parent_mail_id)
        else:  # a parent outside the session: the chain as the e-mail had it
            chain = await email_mail.ancestors(s, m.parent_mail_id)
        shown = hidden.get(m.id)
        out.append(
            email_mail.ThreadMail(
                mail_id=m.id,
                session_id=session.id,
                from_name=m.from_name,
                subject=shown.subject if shown else m.subject,
                body=shown.body if shown else m.body,
                created_at=m.created_at,
                alias=session.alias,
                workspace=session.workspace,
                to=[r.name for r in people[m.seq] if r.role == "to"],
                cc=[r.name for r in people[m.seq] if r.role == "cc"],
                ancestors=chain,
                files=[
                    email_mail.File(a.id, a.name, a.content_type, a.size, a.sha256)
                    for a in files[m.seq]
                ],
            )
        )
    return out, (seqs[-1] if len(mails) == PAGE else None)


def _read(store: BlobStore, files: Sequence[email_mail.File]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for f in files:
        try:
            out[f.attachment_id] = store.path(f.sha256).read_bytes()
        except OSError:  # gone (or unreadable): named with a link instead, and logged
            log.warning("export: the blob of attachment %s cannot be read", f.attachment_id)
    return out


async def messages(
    gw: Gateway, who: Principal, session_id: str
) -> AsyncIterator[tuple[datetime, bytes]]:
    """Each mail of the session as (its time, its message: CRLF, 7-bit), oldest
    first. Call `check` first: this raises NotFound only at its first step."""
    settings = gw.settings
    mail_from = email_mail.export_from(settings.mail_from, settings.public_url)
    store = BlobStore.for_settings(settings)
    parents: dict[str, str | None] = {}
    after: int | None = 0
    while after is not None:
        async with gw.write() as s:  # a write: each mail read is logged
            session = await s.get(SessionRow, session_id)
            if session is None:
                raise not_found(f"session '{session_id}'")
            await access.Reader(who).ensure_read(s, session, f"session '{session_id}'")
            page, after = await _page(s, who, session, after, parents)
        for mail in page:
            contents = await anyio.to_thread.run_sync(_read, store, mail.files)
            msg = email_mail.build(
                mail, mail_from=mail_from, contents=contents, public_url=settings.public_url
            )
            yield mail.created_at, email_mail.to_text(msg).encode("ascii")


def mbox_entry(at: datetime, message: bytes) -> bytes:
    """One message of an mbox: the `From ` line, the message with LF line ends,
    a blank line. No line of our messages starts with `From ` (email_mail.to_text),
    so nothing needs quoting."""
    stamp = f"{at:%a %b} {at.day:2d} {at:%H:%M:%S %Y}".encode("ascii")  # asctime's form
    return b"From agentmail " + stamp + b"\n" + message.replace(b"\r\n", b"\n") + b"\n"


async def mbox(gw: Gateway, who: Principal, session_id: str) -> AsyncIterator[bytes]:
    """The session as an mbox (application/mbox), message by message."""
    async for at, message in messages(gw, who, session_id):
        yield mbox_entry(at, message)
