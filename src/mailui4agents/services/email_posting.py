"""A person's e-mail reply to an agent's mail, posted into the session as their
mail (docs/email.md, "Replies"): its attachments stored as uploads of that
person (services/attachments.py, within `attachment_max_bytes` each), then one
services/sending.send, as the web UI's reply is, so the content limits, access
and delivery are the same. `also` runs in that send's transaction
(services/email_inbound.py records the e-mail there, so it is posted once)."""

from __future__ import annotations

from collections.abc import Sequence

from mailui4agents.domain import reply_words
from mailui4agents.domain.email_parts import InboundFile
from mailui4agents.domain.errors import invalid_value
from mailui4agents.domain.results import Sent
from mailui4agents.services import access, attachments, reading, sending, size_limits
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import MailOut


async def store_files(gw: Gateway, who: Principal, files: Sequence[InboundFile]) -> list[str]:
    """Each file as an attachment uploaded by `who`; their ids, in order.
    TooLarge for a file over attachment_max_bytes (nothing of it is kept)."""
    store = BlobStore.for_settings(gw.settings)
    ids: list[str] = []
    for f in files:
        writer = store.writer()
        try:
            await writer.write(f.data)
            await writer.finish()
            async with gw.write() as s:
                ref = await attachments.create(
                    s, writer, who, filename=f.name, content_type=f.content_type
                )
            ids.append(ref.attachment_id)
        finally:
            writer.abort()  # a no-op once the blob is in place
    return ids


async def post_reply(
    gw: Gateway,
    who: Principal,
    *,
    parent_mail_id: str,
    subject: str,
    body: str,
    files: Sequence[InboundFile] = (),
    also: sending.Also | None = None,
) -> MailOut:
    """Send `who`'s reply to the mail `parent_mail_id`, to its sender's address in
    the session (as the web UI's Reply addresses it); its MailOut. NotFound when
    `who` may not read that mail. `also`: see sending.send."""
    if not body.strip() and not files:
        raise invalid_value("body", "the reply says nothing: write above the quoted e-mail")
    size_limits.check_mail(gw.settings, subject, body)  # before any file is stored
    async with gw.write() as s:  # a write: the read is logged, the mail marked read
        parent = await reading.read_mail(s, access.Reader(who), parent_mail_id, body_limit=None)
    to = str(parent.get("reply_address") or parent["from"])
    ids = await store_files(gw, who, files)
    draft = sending.Draft(
        to=[to],
        subject=subject or reply_words.bare_subject(str(parent["subject"])) or "(no subject)",
        body=body,
        parent_mail_id=parent_mail_id,
        attachment_ids=ids,
    )
    outcome = (await sending.send(gw, who, draft, also=also)).outcome
    assert isinstance(outcome, Sent)  # people send without relay keys: never Duplicate
    return outcome.mail
