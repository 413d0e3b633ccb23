"""The daily digest by e-mail (docs/email.md, "Daily digest"): the scheduler's
"digest" job (services/scheduler.py).

A person whose notification policy has `email_digest_hour` (0-23, in their
`timezone`) gets, once a day when their local hour reaches it, one e-mail that
lists the requests still pending for them and the mails to them not yet read,
both of the last DIGEST_WINDOW (24 h; a request's own mail in the thread is
not counted as a mail), at most MAX_ITEMS of each ("and M more").

A pass reads the people due (`plan`: a digest hour, a verified address, and
`digest_sent_on` not their local date today); each is then claimed in its own
write transaction by a conditional UPDATE of their policy row (`claim`:
`digest_sent_on` NULL or before today -> today), and their digest is built and
queued (services/email_send.enqueue, kind `digest`) in that same transaction.
Of two passes racing (two replicas, or two reads before either wrote) one claim
changes the row; the other changes nothing and sends nothing. A claim with
nothing to say marks the day and sends nothing. A failure rolls the claim back,
so the next pass tries again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import EmailAddressRow, NotifyPolicyRow
from mailui4agents.db.tables import MailRow, PermissionRow, RecipientRow, SessionRow, UserRow
from mailui4agents.domain import notify_policy as rules
from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.masking import mask_text
from mailui4agents.services import access, email_message, email_send

log = logging.getLogger("mailui4agents.email")

DIGEST_WINDOW = timedelta(hours=24)
MAX_ITEMS = 20  # requests listed, and mails listed, in one digest; the rest counted
PER_PASS = 100  # people whose digest is claimed per pass; the rest wait for the next
REQUEST_MAILS = (MailType.PERMISSION_REQUEST, MailType.PERMISSION_DECISION)
PENDING, UNREAD = "Requests waiting for you", "Mails you have not read"
SCAN = 2000  # policies with a digest hour read per pass (those not served first)


@dataclass(frozen=True, slots=True)
class Due:
    user_id: str
    username: str
    day: str  # the person's local date, YYYY-MM-DD


@dataclass(slots=True)
class Result:
    """What a pass did: days claimed, digests queued (e-mails), empty days."""

    claimed: int = 0
    queued: int = 0
    empty: int = 0


async def plan(s: AsyncSession, now: datetime, limit: int = PER_PASS) -> list[Due]:
    """The people whose digest is due at `now` (read only; nothing claimed)."""
    verified = (
        select(EmailAddressRow.id)
        .where(EmailAddressRow.user_id == NotifyPolicyRow.user_id)
        .where(EmailAddressRow.verified_at.is_not(None))
        .exists()
    )
    rows = (
        await s.execute(
            select(
                NotifyPolicyRow.user_id,
                UserRow.username,
                NotifyPolicyRow.email_digest_hour,
                NotifyPolicyRow.timezone,
                NotifyPolicyRow.digest_sent_on,
            )
            .join(UserRow, UserRow.id == NotifyPolicyRow.user_id)
            .where(NotifyPolicyRow.email_digest_hour.is_not(None), verified)
            .order_by(NotifyPolicyRow.digest_sent_on.asc().nulls_first(), NotifyPolicyRow.user_id)
            .limit(SCAN)
        )
    ).all()
    out: list[Due] = []
    for user_id, username, hour, tz, sent_on in rows:
        day = rules.digest_day(now, hour, tz)
        if day is not None and (sent_on is None or sent_on < day):
            out.append(Due(user_id, username, day))
            if len(out) >= limit:
                break
    return out


async def claim(s: AsyncSession, due: Due) -> bool:
    """Take `due`'s day for this transaction: True for exactly one claimer, and
    only while the person still wants a digest."""
    done = cast(
        CursorResult[tuple[()]],
        await s.execute(
            update(NotifyPolicyRow)
            .where(
                NotifyPolicyRow.user_id == due.user_id,
                NotifyPolicyRow.email_digest_hour.is_not(None),
                or_(
                    NotifyPolicyRow.digest_sent_on.is_(None),
                    NotifyPolicyRow.digest_sent_on < due.day,
                ),
            )
            .values(digest_sent_on=due.day)
            .execution_options(synchronize_session=False)
        ),
    )
    return done.rowcount == 1


async def sections(
    s: AsyncSession, username: str, now: datetime, public_url: str | None
) -> list[email_message.DigestSection]:
    """What the digest says: pending requests and unread mails of the last
    DIGEST_WINDOW, each at most MAX_ITEMS listed with their count; empty parts left out."""
    since = now - DIGEST_WINDOW
    base = public_url.rstrip("/") if public_url else None
    pending = (
        PermissionRow.status == "pending",
        PermissionRow.created_at >= since,
        access.decides(username, PermissionRow.session_id),
    )
    n_pending = await s.scalar(select(func.count()).select_from(PermissionRow).where(*pending)) or 0
    requests = (
        await s.execute(
            select(PermissionRow, SessionRow)
            .join(SessionRow, SessionRow.id == PermissionRow.session_id)
            .where(*pending)
            .order_by(PermissionRow.created_at, PermissionRow.id)
            .limit(MAX_ITEMS)
        )
    ).all()
    unread = (
        RecipientRow.name == username,
        RecipientRow.is_human.is_(True),
        RecipientRow.read_at.is_(None),
        MailRow.created_at >= since,
        MailRow.from_name != username,
        # A request's own mail in the thread: the request is listed above already.
        MailRow.type.not_in(REQUEST_MAILS),
    )
    n_unread = (
        await s.scalar(
            select(func.count())
            .select_from(RecipientRow)
            .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
            .where(*unread)
        )
        or 0
    )
    mails = (
        await s.execute(
            select(MailRow, SessionRow)
            .join(RecipientRow, RecipientRow.mail_seq == MailRow.seq)
            .join(SessionRow, SessionRow.id == MailRow.session_id)
            .where(*unread)
            .order_by(MailRow.seq)
            .limit(MAX_ITEMS)
        )
    ).all()
    out: list[email_message.DigestSection] = []
    if n_pending:
        items: list[tuple[str, str | None]] = []
        for row, session in requests:
            tag = email_message.subject_tag(session.alias, session.workspace)
            what = (
                f"question from {row.agent_name}"
                if row.kind == "question"
                else f"{row.tool_name} from {row.agent_name}"
            )
            link = f"{base}/approvals#req-{row.id}" if base else None
            items.append((mask_text(f"{tag} {what}"), link))
        out.append(email_message.DigestSection(PENDING, n_pending, items))
    if n_unread:
        listed: list[tuple[str, str | None]] = []
        for mail, session in mails:
            tag = email_message.subject_tag(session.alias, session.workspace)
            subject = " ".join(mail.subject.split())[:200]
            link = f"{base}/sessions/{session.id}" if base else None
            listed.append((f"{tag} from {mail.from_name}: {subject}", link))
        out.append(email_message.DigestSection(UNREAD, n_unread, listed))
    return out


async def send(s: AsyncSession, due: Due, now: datetime, sender: email_send.EmailSender) -> int:
    """Queue the claimed digest to each of the person's verified addresses;
    how many e-mails were queued (0: nothing to say)."""
    parts = await sections(s, due.username, now, sender.settings.public_url)
    n_pending = sum(p.count for p in parts if p.heading == PENDING)
    n_unread = sum(p.count for p in parts if p.heading == UNREAD)
    if not parts:
        return 0
    found = (
        await s.execute(
            select(EmailAddressRow.id, EmailAddressRow.address)
            .where(EmailAddressRow.user_id == due.user_id, EmailAddressRow.verified_at.is_not(None))
            .order_by(EmailAddressRow.created_at)
        )
    ).all()
    subject = f"[agentmail] digest {due.day}: {n_pending} waiting, {n_unread} unread"
    intro = f"Your agentmail digest for {due.day}, the last 24 hours."
    mail_from = sender.mail_from
    for address_id, address in found:

        def build(outbox_id: str, to: str = address) -> tuple[str, str]:
            return email_message.digest_mail(
                outbox_id=outbox_id,
                mail_from=mail_from,
                to=to,
                subject=subject,
                intro=intro,
                sections=parts,
            )

        await email_send.enqueue(
            s,
            kind="digest",
            user_id=due.user_id,
            address_id=address_id,
            to=address,
            person=due.username,
            build=build,
        )
    return len(found)
