"""A person's e-mail addresses (docs/email.md, "Addresses"): add one (a
verification link is mailed to it), list them with what became of the last
e-mail to each, remove one, and verify one by its link.

An address counts only once verified: the link's POST (web/email_page.py; its
GET changes nothing, because mail scanners follow links). The link's token is
256 random bits, kept only as its SHA-256, used once, expiring after
email_verify_ttl_s. Limits: email_max_addresses per person, and
email_verify_per_hour verification mails per person (each add or re-add sends
one). Your addresses are yours alone: anyone else, admins included, gets 404.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import EmailAddressRow, EmailOutboxRow
from mailui4agents.db.tables import UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_address import BadAddress, normalise_address
from mailui4agents.domain.errors import RateLimited, conflict, invalid_value, not_found
from mailui4agents.domain.notify_policy import Policy
from mailui4agents.services import email_message, email_send, notify_policy
from mailui4agents.services.identity import hash_token
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings
from mailui4agents.wire.email import EmailAddressOut, MailOutcome

HOUR_S = 3600.0
VERIFY_PATH = "/verify-email"  # the link's page: web/email_page.py


def verify_url(base_url: str, token: str) -> str:
    """The verification link on `base_url`, the address the person reached the
    gateway by (as for pairing links), for the API and the web page alike."""
    return f"{base_url.rstrip('/')}{VERIFY_PATH}/{token}"


def _out(row: EmailAddressRow, last: EmailOutboxRow | None) -> EmailAddressOut:
    return EmailAddressOut(
        id=row.id,
        address=row.address,
        verified=row.verified_at is not None,
        verified_at=row.verified_at,
        verify_expires_at=row.token_expires_at if row.verified_at is None else None,
        created_at=row.created_at,
        last_mail=None
        if last is None
        else MailOutcome(
            kind=last.kind,
            state=last.state,
            status_code=last.status_code,
            detail=last.detail,
            message_id=last.message_id,
            queued_at=last.created_at,
            done_at=last.done_at,
        ),
    )


async def _last_mails(s: AsyncSession, ids: list[str]) -> dict[str, EmailOutboxRow]:
    if not ids:
        return {}
    rows = await s.scalars(
        select(EmailOutboxRow)
        .where(EmailOutboxRow.address_id.in_(ids))
        .order_by(EmailOutboxRow.created_at.desc(), EmailOutboxRow.id)
    )
    last: dict[str, EmailOutboxRow] = {}
    for r in rows:
        if r.address_id is not None:
            last.setdefault(r.address_id, r)
    return last


async def list_addresses(s: AsyncSession, who: Principal) -> list[EmailAddressOut]:
    """The caller's addresses, oldest first, each with its last e-mail's outcome."""
    rows = list(
        await s.scalars(
            select(EmailAddressRow)
            .where(EmailAddressRow.user_id == who.id)
            .order_by(EmailAddressRow.created_at, EmailAddressRow.id)
        )
    )
    last = await _last_mails(s, [r.id for r in rows])
    return [_out(r, last.get(r.id)) for r in rows]


async def add_address(
    s: AsyncSession,
    settings: Settings,
    who: Principal,
    text: str,
    link_for: Callable[[str], str],
) -> tuple[EmailAddressOut, bool]:
    """Add `text` to the caller's addresses (or, if it is there unverified, make
    its link anew: the old one stops working) and queue the verification mail
    with `link_for(token)`. Returns the address and whether it is new.
    400 `address`; 409 e-mail not set up, already verified, too many addresses;
    429 too many verification mails this hour."""
    if settings.smtp_url is None or settings.mail_from is None:
        raise conflict(
            "this gateway sends no e-mail: its admin sets it up with agentmail serve "
            "--smtp-url and --mail-from (docs/email.md)",
            reason="email_not_configured",
        )
    try:
        address = normalise_address(text)
    except BadAddress as exc:
        raise invalid_value("address", str(exc)) from None
    row = await s.scalar(
        select(EmailAddressRow).where(
            EmailAddressRow.user_id == who.id, EmailAddressRow.address == address
        )
    )
    if row is not None and row.verified_at is not None:
        raise conflict(f"{address} is verified already", reason="already_verified")
    if row is None:
        have = await s.scalar(
            select(func.count())
            .select_from(EmailAddressRow)
            .where(EmailAddressRow.user_id == who.id)
        )
        if (have or 0) >= settings.email_max_addresses:
            raise conflict(
                f"you have {have} e-mail addresses, the most one person may have "
                "(email_max_addresses): remove one first",
                reason="too_many_addresses",
            )
    now = utcnow()
    hour_ago = now - timedelta(seconds=HOUR_S)
    sent = list(
        await s.scalars(
            select(EmailOutboxRow.created_at)
            .where(
                EmailOutboxRow.user_id == who.id,
                EmailOutboxRow.kind == "verify",
                EmailOutboxRow.created_at > hour_ago,
            )
            .order_by(EmailOutboxRow.created_at)
        )
    )
    if len(sent) >= settings.email_verify_per_hour:
        wait = (sent[0] + timedelta(seconds=HOUR_S) - now).total_seconds()
        raise RateLimited(
            f"{len(sent)} verification e-mails in the last hour, the most one person may "
            f"be sent (email_verify_per_hour): try again in {int(wait) + 1} s",
            retry_after=int(wait) + 1,
        )
    token = secrets.token_urlsafe(32)  # 256 bits
    expires = now + timedelta(seconds=settings.email_verify_ttl_s)
    created = row is None
    if row is None:
        row = EmailAddressRow(user_id=who.id, address=address, created_at=now)
        s.add(row)
    row.token_hash = hash_token(token)
    row.token_expires_at = expires
    await s.flush()
    mail_from, link, ttl = settings.mail_from, link_for(token), settings.email_verify_ttl_s
    queued = await email_send.enqueue(
        s,
        kind="verify",
        user_id=who.id,
        address_id=row.id,
        to=address,
        build=lambda oid: email_message.verification_mail(
            outbox_id=oid, mail_from=mail_from, to=address, person=who.name, link=link, ttl_s=ttl
        ),
    )
    return _out(row, queued), created


async def remove_address(s: AsyncSession, who: Principal, address_id: str) -> None:
    """Remove one of the caller's addresses: its queued e-mail is not sent (it
    ends `failed`; one a sender holds already goes out). Its outbox rows stay,
    without the address, so removing and adding again does not reset
    email_verify_per_hour. Anyone else's, or an unknown id: 404."""
    row = await s.get(EmailAddressRow, address_id)
    if row is None or row.user_id != who.id:
        raise not_found("e-mail address", id=address_id)
    await s.execute(
        update(EmailOutboxRow)
        .where(EmailOutboxRow.address_id == row.id, EmailOutboxRow.state == "queued")
        .values(state="failed", detail=REMOVED, message=None, done_at=utcnow())
    )
    await s.delete(row)


@dataclass(frozen=True)
class Pending:
    """What a verification link's page shows before its button is pressed."""

    address: str
    username: str


async def pending(s: AsyncSession, token: str) -> Pending | None:
    """The address a live link would verify (None: unknown, used or expired)."""
    found = (
        await s.execute(
            select(EmailAddressRow.address, UserRow.username)
            .join(UserRow, UserRow.id == EmailAddressRow.user_id)
            .where(
                EmailAddressRow.token_hash == hash_token(token),
                EmailAddressRow.verified_at.is_(None),
                EmailAddressRow.token_expires_at > utcnow(),
            )
        )
    ).first()
    return None if found is None else Pending(found[0], found[1])


async def verify(s: AsyncSession, token: str) -> Pending:
    """Use the link's token: the address counts from now on. 404 unknown, used or
    expired; 409 the address is verified by another person already (one
    mailbox, one person: a reply from it must name one person)."""
    found = await pending(s, token)
    if found is None:
        raise not_found("verification link", message=UNUSABLE)
    taken = await s.scalar(
        select(func.count())
        .select_from(EmailAddressRow)
        .join(UserRow, UserRow.id == EmailAddressRow.user_id)
        .where(
            EmailAddressRow.address == found.address,
            EmailAddressRow.verified_at.is_not(None),
            UserRow.username != found.username,
        )
    )
    if taken:
        raise conflict(
            f"{found.address} is verified by another person already", reason="address_taken"
        )
    now = utcnow()
    done = await s.execute(
        update(EmailAddressRow)
        .where(
            EmailAddressRow.token_hash == hash_token(token),
            EmailAddressRow.verified_at.is_(None),
            EmailAddressRow.token_expires_at > now,
        )
        .values(verified_at=now, token_hash=None, token_expires_at=None)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]  # used by a POST just before
        raise not_found("verification link", message=UNUSABLE)
    return found


REMOVED = "not sent: the address was removed first"
UNUSABLE = "This verification link is unknown, already used or expired. Add the address again."


class Reachable(NamedTuple):
    """One verified address of a person to mail."""

    user_id: str
    username: str
    address_id: str
    address: str


async def reachable(
    s: AsyncSession, names: Iterable[str], wants: Callable[[Policy], bool]
) -> list[Reachable]:
    """The verified addresses of those of `names` whose notification policy
    `wants` this e-mail (request e-mails: `email`; agents' mails: `email_mail`),
    by person then age; reads nothing for no names."""
    people = list(dict.fromkeys(names))
    if not people:
        return []
    policies = await notify_policy.policies(s, people)
    chosen = [n for n in people if wants(policies[n])]
    if not chosen:
        return []
    rows = await s.execute(
        select(UserRow.id, UserRow.username, EmailAddressRow.id, EmailAddressRow.address)
        .join(EmailAddressRow, EmailAddressRow.user_id == UserRow.id)
        .where(UserRow.username.in_(chosen), EmailAddressRow.verified_at.is_not(None))
        .order_by(UserRow.username, EmailAddressRow.created_at)
    )
    return [Reachable(*row) for row in rows.all()]
