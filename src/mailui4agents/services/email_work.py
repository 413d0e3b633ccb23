"""New work by e-mail (docs/email.md, "New work by e-mail"): a verified person
mails `<agent>+<workspace alias>@<domain>`; the mail starts a new session of that
agent in the workspace the admin named so (`workspace_aliases`), mode
`workspace` unless the subject says `[plan]` or `[full]` and the person may ask
for it. services/email_inbound.py calls `start` once it has checked the sender.

The mail is sent as that person through the one send use case
(services/sending.py), to `agent@workspace.new`, exactly as the API's
`POST /api/v1/mail` would: the tasking rules (services/tasking.py) are judged
again inside its write. What is checked here first is what lets the refusal say
what the person may do instead. A person is only ever told about agents they
may task and the aliases usable with those (a mail naming any other agent is
answered as if it did not exist)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import AgentOwnerRow, AgentRow, AgentTaskerRow
from mailui4agents.domain.addresses import NEW_SESSION, format_parts
from mailui4agents.domain.email_parts import InboundFile
from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.modes import Mode
from mailui4agents.domain.roots import allowed
from mailui4agents.domain.tasking import AgentPolicy, rank
from mailui4agents.services import attachments, sending, size_limits, tasking, workspace_aliases
from mailui4agents.services.blobs import BlobStore, BlobWriter
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway

log = logging.getLogger("mailui4agents.email_work")

#: `[plan]` or `[full]` anywhere in the subject, any case: the mode asked for.
MODE_TAG = re.compile(r"\[\s*(plan|full)\s*\]", re.IGNORECASE)

#: How many agents and aliases a refusal lists (the rest are counted).
LISTED_MAX = 20


@dataclass(frozen=True)
class Started:
    session_id: str
    mail_id: str


class Refused(Exception):
    """Nothing was started; `message` says why and what the person may do, for
    the reply to them. `reason`: no_such_place, mode_not_allowed,
    workspace_not_allowed, not_a_tasker, or the code of the send's own refusal
    (too_large, rate_limited, invalid_value, …)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class NoSuchPlace(Refused):
    """The agent or the workspace alias does not exist (or the person may not
    task it): the message says what does, for the reply to the person."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="no_such_place")


@dataclass(frozen=True)
class _Place:
    """An agent the person may task, their ceiling with it, and the aliases
    whose workspace lies under its roots."""

    policy: AgentPolicy
    ceiling: Mode
    aliases: dict[str, str]  # alias -> workspace


def split_mode(subject: str) -> tuple[Mode | None, str]:
    """The mode a subject's tags ask for (None: no tag) and the subject without
    them. Both tags at once ask for the freer one (it is refused above the
    person's ceiling like any other)."""
    asked = [m.group(1).lower() for m in MODE_TAG.finditer(subject)]
    rest = " ".join(MODE_TAG.sub(" ", subject).split())
    if not asked:
        return None, rest
    mode: Mode = "full" if "full" in asked else "plan"
    return mode, rest


async def _places(s: AsyncSession, person: Principal) -> dict[str, _Place]:
    """The agents `person` may task (owner or tasker), by name."""
    owned = select(AgentRow.name).join(AgentOwnerRow, AgentOwnerRow.agent_id == AgentRow.id)
    tasked = select(AgentRow.name).join(AgentTaskerRow, AgentTaskerRow.agent_id == AgentRow.id)
    names = set(await s.scalars(owned.where(AgentOwnerRow.username == person.name)))
    names |= set(await s.scalars(tasked.where(AgentTaskerRow.username == person.name)))
    found = await tasking.policies(s, names, [person.name])
    every = await workspace_aliases.all_aliases(s)
    out: dict[str, _Place] = {}
    for name in sorted(found):
        policy = found[name]
        ceiling = policy.ceiling_for(person.name)
        if ceiling is None:  # not possible for names found above; never listed
            continue
        usable = {a: w for a, w in every.items() if allowed(policy.roots, w)}
        out[name] = _Place(policy, ceiling, usable)
    return out


def _domain(gw: Gateway) -> str | None:
    sender = gw.settings.mail_from
    return sender.rpartition("@")[2] if sender else None


def _address(gw: Gateway, agent: str, alias: str) -> str:
    domain = _domain(gw)
    return f"{agent}+{alias}@{domain}" if domain else f"{agent}+{alias}"


def _listed(items: list[str]) -> str:
    shown = items[:LISTED_MAX]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _what_exists(gw: Gateway, places: dict[str, _Place]) -> str:
    """What the person may mail, one address per agent and alias."""
    if not places:
        return (
            "You may set no agent to work: ask an agent's owner to add you as a tasker "
            "(agentmail agent taskers AGENT --add YOU)."
        )
    addresses = [_address(gw, n, a) for n, p in places.items() for a in p.aliases]
    if not addresses:
        agents = _listed(list(places))
        return (
            f"You may set {agents} to work, but no workspace alias lies in a folder "
            "it may work in: ask the admin for one (agentmail workspace alias add)."
        )
    return f"You may mail: {_listed(addresses)}."


def _place_of(gw: Gateway, places: dict[str, _Place], agent: str, alias: str) -> _Place:
    place = places.get(agent)
    if place is None:  # a mail client may have changed the case of the local part
        folded = [p for n, p in places.items() if n.casefold() == agent.casefold()]
        place = folded[0] if len(folded) == 1 else None
    if place is None:
        raise NoSuchPlace(
            f"There is no agent '{agent[:80]}' you may set to work. {_what_exists(gw, places)}"
        )
    if alias not in place.aliases:
        name = place.policy.name
        usable = [_address(gw, name, a) for a in place.aliases]
        others = (
            f"With {name} you may mail: {_listed(usable)}."
            if usable
            else f"No workspace alias lies in a folder {name} may work in: ask the admin "
            "for one (agentmail workspace alias add)."
        )
        raise NoSuchPlace(f"There is no workspace alias '{alias[:80]}' for {name}. {others}")
    return place


def _mode_refusal(place: _Place, asked: Mode) -> Refused:
    name = place.policy.name
    lower = "[plan]" if place.ceiling == "plan" else "no tag or [plan]"
    return Refused(
        f"You asked for mode '{asked}', but you may start {name} at most in mode "
        f"'{place.ceiling}'. Send it again with {lower} in the subject; nothing was started.",
        reason="mode_not_allowed",
    )


async def _store(gw: Gateway, person: Principal, files: Sequence[InboundFile]) -> list[str]:
    """The files as `person`'s uploads (each within attachment_max_bytes)."""
    store = BlobStore.for_settings(gw.settings)
    writers: list[tuple[BlobWriter, InboundFile]] = []
    try:
        for f in files:
            writer = store.writer()
            writers.append((writer, f))
            try:
                await writer.write(f.data)
            except DomainError as e:
                raise Refused(
                    f"The attachment '{f.name[:80]}' is {len(f.data)} bytes; at most "
                    f"{store.max_bytes}. Nothing was started.",
                    reason=e.code,
                ) from None
            await writer.finish()
        async with gw.write() as s:
            ids = []
            for writer, f in writers:
                ref = await attachments.create(
                    s, writer, person, filename=f.name, content_type=f.content_type
                )
                ids.append(ref.attachment_id)
        return ids
    finally:
        for writer, _ in writers:
            writer.abort()  # a no-op once placed; else no temp file is left


async def start(
    gw: Gateway,
    person: Principal,
    *,
    agent: str,
    alias: str,
    subject: str,
    body: str,
    files: Sequence[InboundFile] = (),
    email_message_id: str | None = None,
    also: sending.Also | None = None,
) -> Started:
    """Start the session and send its first mail as `person`.

    Raises NoSuchPlace (an unknown agent or alias: the message lists what the
    person may mail) or Refused (the mode, the rules or a limit: the message says
    what they may do); nothing is written then. `also` runs in the transaction
    that stores the first mail (sending.send)."""
    if not person.is_human:
        raise Refused("Only people start work by e-mail.", reason="not_a_tasker")
    asked, subject = split_mode(subject)
    try:
        size_limits.check_mail(gw.settings, subject, body)
        size_limits.check_count("attachments", files, gw.settings.max_recipients)
    except DomainError as e:
        raise Refused(f"{e.message}. Nothing was started.", reason=e.code) from None
    async with gw.read() as r:
        places = await _places(r, person)
    place = _place_of(gw, places, agent, alias.lower())
    if asked is not None and rank(asked) > rank(place.ceiling):
        raise _mode_refusal(place, asked)
    name, workspace = place.policy.name, place.aliases[alias.lower()]
    ids = await _store(gw, person, files)
    draft = sending.Draft(
        to=[format_parts(name, workspace, NEW_SESSION)],
        subject=subject,
        body=body,
        permission_mode=asked,
        attachment_ids=ids,
    )
    try:
        outcome = (await sending.send(gw, person, draft, also=also)).outcome
    except DomainError as e:  # the rules changed since the read above, a rate limit, …
        raise Refused(f"{e.message}. Nothing was started.", reason=e.code) from None
    mail = getattr(outcome, "mail", None)
    assert mail is not None, "a person's mail has no relay key, so it is never a duplicate"
    log.info(
        "new work by e-mail: %s started session %s with %s in %s (message %s)",
        person.name,
        mail.session_id,
        name,
        workspace,
        email_message_id,
    )
    return Started(session_id=mail.session_id, mail_id=mail.id)
