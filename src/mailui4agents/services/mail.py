"""Sending mail: its recipients resolved, its session found or made, stored and
delivered (services/delivery.py). Reading it is services/reading.py."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import (
    bindparam,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, RecipientRow, SessionRow
from mailui4agents.domain.addresses import Address, AddressError, parse_address
from mailui4agents.domain.errors import invalid_value
from mailui4agents.domain.mail_types import MailType, Recipient, Role
from mailui4agents.domain.results import Duplicate, Sent
from mailui4agents.domain.workspaces import WorkspaceError, normalise_workspace
from mailui4agents.events import log
from mailui4agents.services import (
    access,
    attachments,
    budgets,
    delivery,
    email_agent_mail,
    identity,
    sessions,
    size_limits,
    tasking,
)
from mailui4agents.services.principals import Principal
from mailui4agents.services.wire_shapes import MailContext
from mailui4agents.settings import Settings

_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[\\/])")


def _parse_all(field: str, texts: Sequence[str]) -> list[Address]:
    out = []
    for i, text in enumerate(texts):
        try:
            addr = parse_address(text)
        except AddressError as e:
            raise invalid_value(f"{field}[{i}]", str(e)) from None
        if addr.path and not _ABSOLUTE.match(addr.path):
            # "claude@srv/shop.new" is a typo for /srv/shop, not a new workspace.
            raise invalid_value(
                f"{field}[{i}]",
                f"workspace '{addr.path}' in '{text}' must be an absolute path (or empty)",
            )
        try:  # one spelling per directory and per name (domain/workspaces.py, names.py)
            path = normalise_workspace(addr.path)
        except WorkspaceError as e:
            raise invalid_value(f"{field}[{i}]", f"the workspace in '{text}' {e}") from None
        name = unicodedata.normalize("NFC", addr.name)
        out.append(replace(addr, name=name, path=path))
    return out


@dataclass(frozen=True)
class Recipients:
    """Parsed and looked-up recipients of a mail: name → is_human in `human`."""

    to: list[Address]
    cc: list[Address]
    human: dict[str, bool]


def parse_recipients(
    settings: Settings, to: Sequence[str], cc: Sequence[str]
) -> tuple[list[Address], list[Address]]:
    """Check the count and parse `to` and `cc` (no lookup yet)."""
    if not to:
        raise invalid_value("to", "a mail needs at least one recipient in 'to'")
    cap = settings.max_recipients
    if len(to) + len(cc) > cap:
        field = "to" if len(to) > cap else "cc"
        raise invalid_value(
            field,
            f"a mail may have at most {cap} recipients in to and cc together "
            f"(this one has {len(to) + len(cc)})",
            limit=cap,
        )
    return _parse_all("to", to), _parse_all("cc", cc)


def recipients_of(to: list[Address], cc: list[Address], kinds: dict[str, str]) -> Recipients:
    """Parsed recipients with their names' kinds (identity.kinds_of); a name
    without one is refused, by its field."""
    human: dict[str, bool] = {}
    for field, addrs in (("to", to), ("cc", cc)):
        for i, a in enumerate(addrs):
            if a.name not in kinds:
                raise invalid_value(f"{field}[{i}]", f"no user or agent is named '{a.name}'")
            human[a.name] = kinds[a.name] == "user"
    return Recipients(to, cc, human)


async def resolve_recipients(
    s: AsyncSession, settings: Settings, to: Sequence[str], cc: Sequence[str]
) -> Recipients:
    """Check the count, parse, and look every name up in one query. Routes call it
    on a reader before their write transaction (the only writer): names are never
    deleted nor change kind, so the answer still holds when the write runs."""
    to_addrs, cc_addrs = parse_recipients(settings, to, cc)
    kinds = await identity.kinds_of(s, [a.name for a in (*to_addrs, *cc_addrs)])
    return recipients_of(to_addrs, cc_addrs, kinds)


async def contexts(s: AsyncSession, mails: Sequence[MailRow]) -> list[MailContext]:
    """Load sessions, recipients and attachments for many mails in three queries."""
    if not mails:
        return []
    sids = {m.session_id for m in mails}
    sess = {r.id: r for r in (await s.scalars(select(SessionRow).where(SessionRow.id.in_(sids))))}
    recs: dict[int, list[RecipientRow]] = {m.seq: [] for m in mails}
    rows = await s.scalars(select(RecipientRow).where(RecipientRow.mail_seq.in_(list(recs))))
    for r in rows:
        recs[r.mail_seq].append(r)
    atts = await attachments.for_mails(s, list(recs))
    return [MailContext(m, sess[m.session_id], recs[m.seq], atts[m.seq]) for m in mails]


# A reply's parent: its session, and whether the sender takes part in it (Reader.may_post).
_PARENT_SESSION = (
    select(SessionRow, access.takes_part(bindparam("b_name"), SessionRow.id))
    .join(MailRow, MailRow.session_id == SessionRow.id)
    .where(MailRow.id == bindparam("b_mail"))
)


async def send_mail(
    s: AsyncSession,
    settings: Settings,
    sender: Principal,
    *,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    parent_mail_id: str | None = None,
    permission_mode: str | None = None,
    relay: bool = False,
    relay_key: str | None = None,
    from_session_id: str | None = None,
    type_: MailType = MailType.MESSAGE,
    attachment_ids: Sequence[str] = (),
    recipients: Recipients | None = None,
    worktree: bool = False,
) -> Sent | Duplicate:
    """Store a mail and one `new_mail` event per recipient: Sent, or Duplicate
    when this sender used `relay_key` before (nothing is written then).
    `recipients`: `to` and `cc` as resolve_recipients gave them, if already done."""
    if relay_key is not None:
        size_limits.check_relay_key(relay_key)
        # PostgreSQL: concurrent sends with one key must not both pass this check
        # (the loser's unique violation would be a 500). Appends are serialised by
        # the event lock anyway; taking it first makes this check see every
        # committed mail, so the loser answers duplicate_relay.
        await log.take_event_lock(s)
        dup = await s.scalar(
            select(MailRow.id).where(
                MailRow.relay_key == relay_key, MailRow.from_name == sender.name
            )
        )
        if dup is not None:
            return Duplicate(dup, "mail_id")
    rcpt = recipients or await resolve_recipients(s, settings, to, cc)
    to_addrs, cc_addrs, kinds = rcpt.to, rcpt.cc, rcpt.human

    parent_session = None
    if parent_mail_id is not None:
        # The parent's session and whether the sender takes part in it: one query.
        found = (
            await s.execute(_PARENT_SESSION, {"b_mail": parent_mail_id, "b_name": sender.name})
        ).first()
        if found is None or not access.Reader(sender).may_post_known(bool(found[1])):
            raise invalid_value("parent_mail_id", f"no mail '{parent_mail_id}' you can reply to")
        parent_session = found[0]

    # Every attachment is checked before anything is written (docs/behaviour.md).
    scope = access.Reader(sender)
    if attachment_ids:
        scope = await access.reader(s, sender, from_session_id)
    files = await attachments.check_for_send(s, scope, attachment_ids)
    session, created, subject = await sessions.resolve_target(
        s, settings, sender, to_addrs, cc_addrs, subject, parent_session, permission_mode
    )
    deliveries: list[Recipient] = []
    seen: set[str] = set()
    roles: tuple[tuple[Role, list[Address]], ...] = (("to", to_addrs), ("cc", cc_addrs))
    for role, addrs in roles:
        for a in addrs:
            if a.name not in seen:  # one delivery per person, "to" wins over "cc"
                seen.add(a.name)
                deliveries.append(Recipient(a.name, kinds[a.name], role))
    # Who may set an agent to work, where and how freely (docs/access.md): refused
    # before anything of the mail is written (a session made above rolls back).
    await tasking.check_send(
        s, sender, deliveries, session, created, permission_mode, from_session_id, type_
    )
    await budgets.check_send(
        s, settings, sender, session, relay, [r.is_human for r in deliveries], type_
    )
    if created and worktree:  # ignored on a reply, as docs/review.md says
        session.worktree = True
    if created:
        # The humans on a session's first mail own it (docs/access.md).
        owners = [sender.name] if sender.is_human else []
        owners += [r.name for r in deliveries if r.is_human and r.role == "to"]
        await access.add_owners(s, session.id, owners, by=sender.name)
    ctx = await delivery.deliver(
        s,
        session,
        sender=sender.name,
        sender_human=sender.is_human,
        recipients=deliveries,
        subject=subject,
        body=body,
        parent_mail_id=parent_mail_id,
        type_=type_,
        relay=relay,
        relay_key=relay_key,
        from_session_id=from_session_id,
        files=files,
    )
    if not sender.is_human:  # an agent's mail, e-mailed to its people (docs/email.md)
        await email_agent_mail.queue_mail(s, ctx)
    return Sent(ctx.item(sender.name))
