"""E-mail that comes in (docs/email.md, "Replies"): whatever brought it (the IMAP
fetcher, the SMTP listener), `receive` decides what it is and does it, exactly
once per message:

- a reply to a request e-mail (its reply address `<local>+<token>@<domain>`, or
  the token in References) decides the request when the first line that is not
  quoted and not a signature says so (domain/reply_words.py);
- a reply to an agent's e-mail goes into the session as that person's mail;
- a mail to `<agent>+<workspace alias>@<domain>` from a verified person starts
  new work (services/email_work.py);
- anything else is refused, with a reason code.

The checks, in order (each refusal names its reason): the size
(`email_in_max_bytes`) before the bytes are parsed; a message already received
(its Message-ID, else the SHA-256 of its bytes, the unique key of its
`email_inbound` row); an auto-reply (RFC 3834) is never acted on nor answered;
exactly one From address, one of a person's verified addresses; with
`require_dkim`, a DKIM signature of the From's domain (services/email_dkim.py);
then the token: one we issued, of that person, of the kind `reply`, unexpired,
not contradicted by another token in References, and for a request unused: it
is used in the transaction that decides, through permission_decisions.decide
(channel `email`, the address as the device), so first-answer-wins holds across
every channel.

Every outcome is an `email_inbound` row, counted (`Gateway.email_in_counts`)
and logged. The row is inserted in the transaction of what it records (the
decision, the posted or first mail through sending.send's `also`, the refusal
and its answer), so both commit or neither: a gateway that stops before the
commit leaves nothing, and the message fetched again is acted on; a second copy
racing collides on the key in its own transaction, which rolls back
(`duplicate`, nothing done). The look-up of the key before the checks only
spares the work for a copy received long before. A refusal about a request is
also a line of the request's deliveries (state `refused`). The gateway answers
(outbox kind `answer`, in the person's thread) only a verified person, at most
ANSWERS_PER_HOUR times an hour, never an auto-reply and never a sender it does
not know: no backscatter.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import (
    EmailAddressRow,
    EmailInboundRow,
    EmailOutboxRow,
    EmailTokenRow,
    RequestDeliveryRow,
)
from mailui4agents.db.tables import PermissionRow, UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain import email_reading, reply_words
from mailui4agents.domain.email_address import BadAddress, normalise_address
from mailui4agents.domain.email_reading import Inbound, Malformed
from mailui4agents.domain.errors import Conflict, DomainError, Forbidden, NotFound
from mailui4agents.domain.results import Sent
from mailui4agents.services import (
    email_dkim,
    email_message,
    email_send,
    email_tokens,
    email_work,
    permission_decisions,
    permissions,
    sending,
    size_limits,
)
from mailui4agents.services.email_posting import post_reply
from mailui4agents.services.permission_decisions import Choice
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import MailOut

log = logging.getLogger("mailui4agents.email")

Via = Literal["imap", "smtp"]
Outcome = Literal["decided", "posted", "started", "refused", "duplicate"]
ANSWERS_PER_HOUR = 20  # answers to one person: a forged From cannot flood them
DETAIL_CHARS = 500
NOT_UNDERSTOOD = "I did not understand: reply approve or deny, with a note after deny"


@dataclass(frozen=True)
class Received:
    """What became of one inbound e-mail."""

    outcome: Outcome
    reason: str | None = None  # a short code when refused: bad_token, not_verified, …
    detail: str | None = None


@dataclass(frozen=True)
class Person:
    """The verified owner of the From address."""

    principal: Principal
    address_id: str
    address: str


@dataclass
class _Job:
    """One e-mail on its way through the checks."""

    gw: Gateway
    raw: bytes
    head: dict[str, str | None] = field(default_factory=dict)  # the row's key and headers
    mail: Inbound | None = None
    from_addr: str | None = None
    person: Person | None = None
    token: EmailTokenRow | None = None
    token_owner: str | None = None  # the username the token was issued to
    ids: dict[str, str | None] = field(default_factory=dict)  # request/session/mail ids


class _Duplicate(Exception):
    """The row's key is taken: this message was received before, or a copy of it
    is racing this one and committed first."""


class _Refusal(Exception):
    """A refusal: `reason` (the code), `detail`, and what to answer, if anything."""

    def __init__(self, reason: str, detail: str, answer: str | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.answer = reason, detail, answer


async def receive(
    gw: Gateway, raw: bytes, *, via: Via, envelope_to: Sequence[str] = ()
) -> Received:
    """Act on one inbound e-mail, its whole RFC 5322 bytes, exactly once: the
    second call with the same message is `duplicate`, and a call that never
    returned (the gateway stopped) committed nothing, so a transport removes
    the message from its source only after this returns. Never raises for what
    the message says: a malformed or hostile e-mail is `refused`. Raises
    OperationalError/InterfaceError when the database fails, having committed
    nothing, so the transport tries the message again later."""
    job = _Job(gw, raw)
    try:
        return await _receive(job, via, envelope_to)
    except (OperationalError, InterfaceError) as exc:
        # The database is unreachable or busy (a dropped connection, a lock
        # timeout): nothing was committed, so the transport keeps the message
        # and hands it again (the IMAP fetcher's next pass, the listener's 451
        # to the sending MX) instead of it being recorded as refused.
        log.warning("e-mail in (%s): the database failed, to be tried again: %r", via, exc)
        gw.email_in_counts["retry:database"] += 1
        raise
    except Exception as exc:  # a bug: recorded, counted, never silent
        log.exception("e-mail in (%s): could not be handled", via)
        got = Received("refused", "error", f"could not be handled: {exc!r}"[:DETAIL_CHARS])
        if job.head:  # recorded, so that a message that fails is not tried forever
            try:
                async with gw.write() as s:
                    await _record(s, job, got)
            except _Duplicate:
                log.warning("e-mail in: a copy of the failed message was handled meanwhile")
            except Exception:
                log.exception("e-mail in: the failure could not be recorded either")
        gw.email_in_counts["refused"] += 1
        gw.email_in_counts["refused:error"] += 1
        return got


def _key(mail: Inbound | None, raw: bytes) -> str:
    if mail is not None and mail.message_id:
        return mail.message_id[:300]
    return f"sha256:{hashlib.sha256(raw).hexdigest()}"


async def _received_before(job: _Job, via: str, envelope_to: Sequence[str]) -> bool:
    """Note the row's key and headers; True when a row of that key exists (a
    cheap look-up: the unique key in the acting transaction is what holds)."""
    mail = job.mail
    to = [*envelope_to, *(mail.recipients if mail else [])]
    job.head = {
        "dedupe_key": _key(mail, job.raw),
        "via": via,
        "from_addr": mail.from_addresses[0][:254] if mail and mail.from_addresses else None,
        "to_addr": to[0][:254] if to else None,
        "subject": mail.subject[:300] if mail else None,
    }
    async with job.gw.read() as s:
        found = await s.scalar(
            select(EmailInboundRow.id)
            .where(EmailInboundRow.dedupe_key == job.head["dedupe_key"])
            .limit(1)
        )
    return found is not None


async def _receive(job: _Job, via: str, envelope_to: Sequence[str]) -> Received:
    gw = job.gw
    try:
        limit = gw.settings.email_in_max_bytes
        if len(job.raw) > limit:
            if await _received_before(job, via, envelope_to):
                raise _Duplicate
            return await _refuse(job, _Refusal("too_big", f"{len(job.raw)} bytes, over {limit}"))
        try:
            job.mail = email_reading.read(job.raw)
        except Malformed as exc:
            if await _received_before(job, via, envelope_to):
                raise _Duplicate from None
            return await _refuse(job, _Refusal("malformed", str(exc)))
        if await _received_before(job, via, envelope_to):
            raise _Duplicate
        try:
            return await _act(job, envelope_to)
        except _Refusal as no:
            return await _refuse(job, no)
    except _Duplicate:
        log.info("e-mail in (%s): %s received before: duplicate", via, job.head["dedupe_key"])
        return _counted(gw, Received("duplicate"))


async def _act(job: _Job, envelope_to: Sequence[str]) -> Received:
    gw, mail = job.gw, job.mail
    assert mail is not None
    if mail.auto:
        raise _Refusal("auto_reply", "an automatic reply (Auto-Submitted, Precedence): ignored")
    if mail.from_headers != 1 or len(mail.from_addresses) != 1:
        raise _Refusal("no_from", f"{len(mail.from_addresses)} From addresses; one is needed")
    try:
        job.from_addr = normalise_address(mail.from_addresses[0])
    except BadAddress as exc:
        raise _Refusal("no_from", f"the From address is not usable: {exc}") from None
    mail_from = gw.settings.mail_from
    if mail_from is None:
        raise _Refusal("not_configured", "this gateway has no mail_from: it gave out no addresses")
    recipients = list(envelope_to) or mail.recipients
    in_address = [t for r in recipients if (t := email_tokens.token_in_address(mail_from, r))]
    in_references = email_tokens.tokens_in_references(mail.references)
    token = in_address[0] if in_address else (in_references[-1] if in_references else None)

    async with gw.read() as s:
        job.person = await _person(s, job.from_addr)
        if token is not None:
            job.token = await email_tokens.find(s, token)
            if job.token is not None:
                job.token_owner = await s.scalar(
                    select(UserRow.username).where(UserRow.id == job.token.user_id)
                )
                job.ids.update(
                    request_id=job.token.request_id,
                    session_id=job.token.session_id,
                    mail_id=job.token.mail_id,
                )
    if job.person is None:
        async with gw.read() as s:
            known = await s.scalar(
                select(EmailAddressRow.id).where(EmailAddressRow.address == job.from_addr).limit(1)
            )
        if known is not None:
            raise _Refusal("not_verified", f"{job.from_addr} is not verified")
        raise _Refusal("unknown_sender", f"{job.from_addr} is no person's address")
    if gw.settings.require_dkim:
        domain = job.from_addr.rsplit("@", 1)[1]
        checked = await email_dkim.verify(job.raw, domain, gw.dkim_dns)
        if not checked.ok:
            raise _Refusal("dkim_failed", checked.detail)
    if token is None:
        work = _work_address(mail_from, recipients)
        if work is not None:
            return await _start_work(job, *work)
        raise _Refusal(
            "no_token",
            "names no request, mail or agent of this gateway",
            "This e-mail names nothing agentmail sent: answer a request or an agent's "
            "e-mail with your mail app's Reply, which keeps the address it came from.",
        )
    tok = job.token
    if tok is None or tok.kind != "reply":
        raise _Refusal(
            "bad_token",
            "the reply token is not one this gateway gave out",
            "This e-mail's reply address is not one agentmail gave out.",
        )
    if tok.user_id != job.person.principal.id:
        raise _Refusal(
            "wrong_person",
            f"the reply token was sent to {job.token_owner}, not {job.person.principal.name}",
            "This reply address was sent to another person: only they can answer with it.",
        )
    if in_address and in_references and in_address[0] not in in_references:
        raise _Refusal(
            "token_mismatch",
            "the reply address and References name different e-mails",
            "The address you replied to and the e-mail you replied to do not match: "
            "reply to the request's e-mail itself.",
        )
    if tok.expires_at <= utcnow():
        raise _Refusal("expired", "the reply token has expired", "This e-mail has expired.")
    if tok.request_id is not None:
        return await _decide(job, tok.request_id)
    if tok.mail_id is not None:
        return await _post(job, tok.mail_id)
    raise _Refusal("bad_token", "the reply token names no request and no mail")


async def _person(s: AsyncSession, address: str) -> Person | None:
    found = (
        await s.execute(
            select(EmailAddressRow.id, UserRow.id, UserRow.username, UserRow.is_admin)
            .join(UserRow, UserRow.id == EmailAddressRow.user_id)
            .where(EmailAddressRow.address == address, EmailAddressRow.verified_at.is_not(None))
            .order_by(EmailAddressRow.verified_at)
            .limit(1)
        )
    ).first()
    if found is None:
        return None
    address_id, user_id, name, admin = found
    return Person(
        Principal(kind="user", id=user_id, name=name, is_admin=bool(admin)), address_id, address
    )


def _work_address(mail_from: str, recipients: Sequence[str]) -> tuple[str, str] | None:
    """(agent, alias) of the first `<agent>+<alias>@<our domain>` recipient that is
    not the gateway's own address."""
    own_local, _, own_domain = mail_from.rpartition("@")
    for r in recipients:
        local, _, domain = r.strip().strip("<>").rpartition("@")
        agent, plus, alias = local.partition("+")
        if domain.lower() != own_domain.lower() or not plus or not agent or not alias:
            continue
        if agent.lower() == own_local.split("+", 1)[0].lower():
            continue
        return agent, alias
    return None


# --- what a reply does ------------------------------------------------------------------


async def _decide(job: _Job, request_id: str) -> Received:
    gw, tok, person, mail = job.gw, job.token, job.person, job.mail
    assert tok is not None and person is not None and mail is not None
    async with gw.read() as s:
        row = await s.get(PermissionRow, request_id)
    if row is None:
        raise _Refusal("bad_token", "the request is gone")
    if row.status != "pending":
        raise _already(permissions.already_decided(row))
    if tok.used_at is not None:
        raise _used()
    words = reply_words.read_decision(
        mail.text, kind=row.kind, options=row.options, multi_select=row.multi_select
    )
    if words is None:
        hint = ", or an option's number or label" if row.kind == "question" else ""
        raise _Refusal("not_understood", "its first line decides nothing", NOT_UNDERSTOOD + hint)
    choice = Choice(
        words.decision,
        words.note,
        always=words.always,
        answers=words.answers,
        channel="email",
        device=person.address,
    )
    try:
        size_limits.check_decision(gw.settings, choice.note, None, choice.answers)
        async with gw.write() as s:
            if not await email_tokens.use(s, tok):
                raise _used()
            out = await permission_decisions.decide(s, person.principal, request_id, choice)
            said = f"{out.status}" + (f": {choice.note}" if choice.note else "")
            got = Received("decided", None, said)
            await _record(s, job, got)
    except Conflict as exc:
        raise _already(exc) from None
    except (Forbidden, NotFound) as exc:
        raise _Refusal("not_decider", exc.message, f"Nothing changed: {exc.message}.") from None
    except DomainError as exc:
        raise _Refusal("bad_decision", exc.message, f"Nothing changed: {exc.message}") from None
    return _logged(job, got)


def _already(conflict: Conflict) -> _Refusal:
    """Decided before this reply: who decided, from where, on which channel."""
    said = conflict.message
    channel = conflict.extra.get("channel")
    if channel:
        said = f"{said} (channel: {channel})"
    return _Refusal("already_decided", said, f"Nothing changed: {said}.")


def _used() -> _Refusal:
    return _Refusal(
        "already_used",
        "this reply address was used already",
        "Nothing changed: this e-mail was answered already.",
    )


async def _post(job: _Job, mail_id: str) -> Received:
    person, mail = job.person, job.mail
    assert person is not None and mail is not None
    recorded: list[Received] = []
    try:
        await post_reply(
            job.gw,
            person.principal,
            parent_mail_id=mail_id,
            subject=reply_words.bare_subject(mail.subject),
            body=reply_words.own_text(mail.text),
            files=mail.files,
            also=_recording(job, recorded, lambda m: f"mail {m.id} to {', '.join(m.to)}"),
        )
    except DomainError as exc:
        raise _Refusal(
            "not_posted", exc.message, f"Your reply was not sent: {exc.message}"
        ) from None
    return _settled(job, recorded)


async def _start_work(job: _Job, agent: str, alias: str) -> Received:
    person, mail = job.person, job.mail
    assert person is not None and mail is not None
    recorded: list[Received] = []
    try:
        await email_work.start(
            job.gw,
            person.principal,
            agent=agent,
            alias=alias,
            subject=reply_words.bare_subject(mail.subject),
            body=reply_words.own_text(mail.text),
            files=mail.files,
            email_message_id=mail.message_id,
            also=_recording(
                job, recorded, lambda m: f"{agent}+{alias}: session {m.session_id}", "started"
            ),
        )
    except email_work.Refused as exc:
        raise _Refusal(exc.reason, exc.message, exc.message) from None
    except DomainError as exc:
        raise _Refusal("not_started", exc.message, f"Nothing was started: {exc.message}") from None
    return _settled(job, recorded)


# --- recording, answering, counting -------------------------------------------------------


def _recording(
    job: _Job,
    recorded: list[Received],
    detail: Callable[[MailOut], str],
    outcome: Outcome = "posted",
) -> sending.Also:
    """The write sending.send makes in its own transaction once the mail is
    stored: the e-mail's row, so the mail and the row commit together."""

    async def record(s: AsyncSession, sent: Sent) -> None:
        job.ids.update(session_id=sent.mail.session_id, mail_id=sent.mail.id)
        got = Received(outcome, None, detail(sent.mail))
        await _record(s, job, got)
        recorded.append(got)

    return record


def _settled(job: _Job, recorded: list[Received]) -> Received:
    if len(recorded) != 1:  # the send returned without running `also`: a bug
        raise RuntimeError(f"the mail was sent, but its e-mail recorded {len(recorded)} times")
    return _logged(job, recorded[0])


async def _refuse(job: _Job, no: _Refusal) -> Received:
    got = Received("refused", no.reason, no.detail[:DETAIL_CHARS])
    async with job.gw.write() as s:
        answered = await _answer(s, job, no.answer) if no.answer else False
        if no.answer and not answered:
            got = replace(got, detail=f"{got.detail} (not answered)"[:DETAIL_CHARS])
        await _record(s, job, got)
        request_id = job.ids.get("request_id")
        if request_id is not None:
            s.add(
                RequestDeliveryRow(
                    request_id=request_id,
                    channel="email",
                    person=job.token_owner,
                    device_name=job.from_addr,
                    state="refused",
                    detail=f"{no.reason}: {got.detail}"[:DETAIL_CHARS],
                )
            )
    return _logged(job, got)


async def _record(s: AsyncSession, job: _Job, got: Received) -> None:
    """Insert the e-mail's row, as it ends, in the transaction `s` of what it
    records; _Duplicate when its key is taken (the caller's transaction then
    rolls back: nothing of it is done)."""
    person = job.person
    await s.flush()  # what the caller wrote: its own errors are not a duplicate
    s.add(
        EmailInboundRow(
            **job.head,
            outcome=got.outcome,
            reason=got.reason,
            detail=got.detail,
            user_id=person.principal.id if person else None,
            token_id=job.token.id if job.token else None,
            request_id=job.ids.get("request_id"),
            session_id=job.ids.get("session_id"),
            mail_id=job.ids.get("mail_id"),
        )
    )
    try:
        await s.flush()
    except IntegrityError:
        raise _Duplicate from None


async def _answer(s: AsyncSession, job: _Job, text: str) -> bool:
    """Queue an answer to the person's verified address, in their thread; False
    when there is nobody to answer or they had ANSWERS_PER_HOUR this hour."""
    person, mail, sender = job.person, job.mail, email_send.configured_sender(s)
    if person is None or mail is None or mail.auto or sender is None:
        return False
    since = utcnow() - timedelta(hours=1)
    sent = await s.scalar(
        select(func.count())
        .select_from(EmailOutboxRow)
        .where(
            EmailOutboxRow.user_id == person.principal.id,
            EmailOutboxRow.kind == "answer",
            EmailOutboxRow.created_at > since,
        )
    )
    if (sent or 0) >= ANSWERS_PER_HOUR:
        log.warning("e-mail in: no answer to %s: %d this hour", person.address, sent)
        return False
    references = mail.references.split()
    mail_from = sender.mail_from

    def build(outbox_id: str) -> tuple[str, str]:
        return email_message.answer_mail(
            outbox_id=outbox_id,
            mail_from=mail_from,
            to=person.address,
            subject=mail.subject,
            in_reply_to=mail.message_id,
            references=[r for r in references if email_reading.normal_message_id(r) == r],
            text=f"{text}\n",
        )

    await email_send.enqueue(
        s,
        kind="answer",
        user_id=person.principal.id,
        address_id=person.address_id,
        to=person.address,
        build=build,
        person=person.principal.name,
    )
    return True


def _counted(gw: Gateway, got: Received) -> Received:
    gw.email_in_counts[got.outcome] += 1
    if got.reason:
        gw.email_in_counts[f"{got.outcome}:{got.reason}"] += 1
    return got


def _logged(job: _Job, got: Received) -> Received:
    _counted(job.gw, got)
    level = logging.INFO if got.outcome != "refused" else logging.WARNING
    log.log(
        level,
        "e-mail in from %s: %s%s: %s",
        job.from_addr or "?",
        got.outcome,
        f" ({got.reason})" if got.reason else "",
        got.detail,
    )
    return got
