"""Sending a mail, the one use case behind every adapter: a person's mail from
the API (api/mail.py) and from the web UI (web/data.py), an agent's
(api/agent.py). The content limits, the recipients looked up on a reader before
the one writer is taken, then services/mail.send_mail. A caller whose own record
must commit with the mail or not at all (an inbound e-mail's row,
services/email_inbound.py) passes `also`: it runs in the send's transaction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.results import Duplicate, Sent
from mailui4agents.services import identity, mail, size_limits
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.state import Gateway
from mailui4agents.wire.events import EventType


@dataclass(frozen=True)
class Draft:
    """What a sender asks for. `permission_mode` only on a person's mail that
    makes a session; `relay`, `relay_key`, `from_session_id` and `type_` only on
    an agent's (people send without relay keys)."""

    to: Sequence[str]
    subject: str
    body: str
    cc: Sequence[str] = ()
    parent_mail_id: str | None = None
    attachment_ids: Sequence[str] = ()
    permission_mode: str | None = None
    relay: bool = False
    relay_key: str | None = None
    from_session_id: str | None = None
    type_: MailType = MailType.MESSAGE  # MESSAGE, RELAY, FAILURE or WORK
    #: A person's "own worktree" for a session this mail makes (docs/review.md);
    #: ignored on a mail into an existing session.
    worktree: bool = False


@dataclass(frozen=True)
class Published:
    """One event a send wrote: to whom (the event-log key) and its type."""

    principal: str
    type: str


@dataclass(frozen=True)
class SendResult:
    """Sent (its mail) or Duplicate (a relay key used before: nothing written,
    no event), and the events written: one `new_mail` per recipient."""

    outcome: Sent | Duplicate
    events: tuple[Published, ...] = field(default=())


#: A write to make in the send's own transaction, once the mail is stored: it
#: commits with the mail, and an exception from it undoes the mail.
Also = Callable[[AsyncSession, Sent], Awaitable[None]]


async def send(
    gw: Gateway, sender: Principal, draft: Draft, *, also: Also | None = None
) -> SendResult:
    """Store and deliver `draft` from `sender` (domain errors name the field).
    `also` runs in the same transaction after the mail is stored; not for a
    relay key's Duplicate (nothing was stored)."""
    size_limits.check_mail(gw.settings, draft.subject, draft.body)
    to, cc = list(draft.to), list(draft.cc)
    # Lookups before the one writer is taken; none, and no read session, when
    # every name was found before (identity.remembered_kinds).
    to_addrs, cc_addrs = mail.parse_recipients(gw.settings, to, cc)
    wanted = [a.name for a in (*to_addrs, *cc_addrs)]
    kinds = identity.remembered_kinds(gw.db.reader.sync_engine, wanted)
    if kinds is None:
        async with gw.read() as r:
            kinds = await identity.kinds_of(r, wanted)
    recipients = mail.recipients_of(to_addrs, cc_addrs, kinds)
    async with gw.write(inline=True) as s:
        outcome = await mail.send_mail(
            s,
            gw.settings,
            sender,
            to=to,
            cc=cc,
            subject=draft.subject,
            body=draft.body,
            parent_mail_id=draft.parent_mail_id,
            permission_mode=draft.permission_mode,
            relay=draft.relay,
            relay_key=draft.relay_key,
            from_session_id=draft.from_session_id,
            type_=draft.type_,
            attachment_ids=list(draft.attachment_ids),
            recipients=recipients,
            worktree=draft.worktree,
        )
        if also is not None and isinstance(outcome, Sent):
            await also(s, outcome)
    if isinstance(outcome, Duplicate):
        return SendResult(outcome)
    # One delivery per name (services/mail.send_mail: "to" wins over "cc").
    names = dict.fromkeys(a.name for a in (*recipients.to, *recipients.cc))
    return SendResult(
        outcome,
        tuple(Published(principal_key(n, recipients.human[n]), EventType.NEW_MAIL) for n in names),
    )
