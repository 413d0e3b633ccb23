"""An agent's mail e-mailed to the people it is delivered to (docs/email.md,
"Agents' mails by e-mail"): hooked in where every mail an agent sends is stored
(services/mail.send_mail), in the send's transaction, sent after commit by the
e-mail sender (services/email_send.py).

Who gets it: each person among the mail's recipients (never its sender) whose
notification policy has `email_mail` on (services/notify_policy.py), at each of
their verified addresses. Each copy has its own reply address (a `reply` token
bound to the person, the address, the session and the mail, valid
`email_reply_ttl_s`), in Reply-To and References; the rest of the message is
services/email_mail.build's, the export's too. A gateway without SMTP reads
nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import anyio
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.types import utcnow
from mailui4agents.domain import markdown
from mailui4agents.services import email_addresses, email_mail, email_send, email_tokens
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.email_message import Personal, subject_tag
from mailui4agents.services.wire_shapes import MailContext


def files_of(ctx: MailContext) -> list[email_mail.File]:
    return [
        email_mail.File(a.id, a.name, a.content_type, a.size, a.sha256) for a in ctx.attachments
    ]


async def read_files(store: BlobStore, files: list[email_mail.File]) -> dict[str, bytes]:
    """The bytes of `files`, by attachment id (in a worker thread: not on the loop)."""
    out: dict[str, bytes] = {}
    for f in files:
        out[f.attachment_id] = await anyio.to_thread.run_sync(store.path(f.sha256).read_bytes)
    return out


def thread_mail(ctx: MailContext, ancestors: list[str]) -> email_mail.ThreadMail:
    mail, session = ctx.mail, ctx.session
    ordered = sorted(ctx.recipients, key=lambda r: r.position)
    return email_mail.ThreadMail(
        mail_id=mail.id,
        session_id=session.id,
        from_name=mail.from_name,
        subject=mail.subject,
        body=mail.body,
        created_at=mail.created_at,
        alias=session.alias,
        workspace=session.workspace,
        to=[r.name for r in ordered if r.role == "to"],
        cc=[r.name for r in ordered if r.role == "cc"],
        ancestors=ancestors,
        files=files_of(ctx),
    )


def _built(mid: str, text: str) -> Callable[[str], tuple[str, str]]:
    """email_send.enqueue's `build` for a message made already: its Message-ID is
    the mail's, not the outbox row's (one Message-ID for every copy)."""

    def build(_outbox_id: str) -> tuple[str, str]:
        return mid, text

    return build


async def queue_mail(s: AsyncSession, ctx: MailContext) -> int:
    """Queue the e-mail of the agent's mail `ctx` to each verified address of its
    human recipients whose `email_mail` is on; how many were queued."""
    sender = email_send.configured_sender(s)
    if sender is None or ctx.mail.from_human:
        return 0
    mail = ctx.mail
    people = list(
        dict.fromkeys(r.name for r in ctx.recipients if r.is_human and r.name != mail.from_name)
    )
    if not people:
        return 0
    found = await email_addresses.reachable(s, people, lambda p: p.email_mail)
    if not found:
        return 0
    settings, mail_from = sender.settings, sender.mail_from
    thread = thread_mail(ctx, await email_mail.ancestors(s, mail.parent_mail_id))
    store = BlobStore.for_settings(settings)
    contents = await read_files(
        store, email_mail.carried(thread.files, settings.email_attach_max_bytes)
    )
    mid = email_mail.mail_message_id(mail.id, mail_from)
    base = settings.public_url.rstrip("/") if settings.public_url else None
    tag = subject_tag(ctx.session.alias, ctx.session.workspace)
    footer = f"{mail.from_name}'s mail in {tag}. Reply to this e-mail to answer in the session"
    footer += f", or open it: {base}/sessions/{ctx.session.id}" if base else "."
    expires = utcnow() + timedelta(seconds=settings.email_reply_ttl_s)
    body_html = markdown.to_html(mail.body)  # once: the copies differ in their headers
    for user_id, username, address_id, address in found:
        token = await email_tokens.issue(
            s,
            kind="reply",
            user_id=user_id,
            address_id=address_id,
            session_id=ctx.session.id,
            mail_id=mail.id,
            message_id=mid,
            expires_at=expires,
        )
        personal = Personal(
            reply_to=email_tokens.reply_address(mail_from, token),
            token_reference=email_tokens.reference(mail_from, token),
        )
        text = email_mail.to_text(
            email_mail.build(
                thread,
                mail_from=mail_from,
                contents=contents,
                public_url=settings.public_url,
                addressee=(username, address),
                personal=personal,
                footer=footer,
                body_html=body_html,
            )
        )
        await email_send.enqueue(
            s,
            kind="mail",
            user_id=user_id,
            address_id=address_id,
            to=address,
            session_id=ctx.session.id,
            mail_id=mail.id,
            build=_built(mid, text),
        )
    return len(found)
