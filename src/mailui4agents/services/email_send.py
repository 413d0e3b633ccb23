"""Sending e-mail by SMTP to the configured relay (docs/email.md), with
`aiosmtplib`.

An e-mail is an `email_outbox` row holding the whole message, written by
`enqueue` inside the transaction that makes it necessary and sent after that
transaction commits. Rows are claimed as pushes are (services/outbox.py: a
conditional UPDATE, a lease, `attempts` + 1), so one replica sends each.

Never twice once the relay said 250 (docs/email.md, "Never twice"): just before
DATA the row goes from `sending` to `handed`, committed. A `handed` row is never
claimed again. If the process dies between the relay's 250 and the commit of
`sent`, or the connection drops after DATA went out and before an answer came,
nobody can tell whether the relay took the message: the row ends `unknown`
(final, counted, logged, shown to its person) rather than be sent again. That is
at most once from DATA on; before DATA (connection, TLS, login, MAIL, RCPT) any
failure is safe to retry.

Outcomes (each counted in `EmailSender.counts`, failures logged):
- 250 after DATA: `sent`, with the relay's answer.
- a 4xx answer at any step, no connection, a timeout before DATA: retried with
  exponential back-off (email_retry_base_s, doubled), MAX_ATTEMPTS in all, then
  `failed`.
- a 5xx answer (an unknown recipient, a refused login), no STARTTLS from a relay
  that is not loopback: `failed` at once, with the relay's answer.
- the connection lost after DATA went out, or a crash while `handed`: `unknown`.
"""

from __future__ import annotations

import collections
import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiosmtplib
import anyio
from pydantic import SecretStr
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.base import new_id
from mailui4agents.db.engine import Database
from mailui4agents.db.reach_tables import EmailOutboxRow, RequestDeliveryRow
from mailui4agents.db.tables import UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_address import Relay, parse_relay
from mailui4agents.services import outbox
from mailui4agents.settings import Settings

log = logging.getLogger("mailui4agents.email")

KINDS = frozenset({"verify", "request", "answer", "mail", "digest"})
MAX_ATTEMPTS = 6
TIMEOUT_S = 30.0  # each SMTP step (connect, a command, DATA's answer)
LEASE_S = 300.0  # > every step's timeout together: a live sender keeps its claim
BATCH = 20
AT_ONCE = 4  # connections to the relay at the same time
KEEP_DONE_S = 86400.0  # final rows are swept after a day (services/scheduler.py)
FINAL = ("sent", "failed", "unknown")
DETAIL_CHARS = 500
UNKNOWN_AFTER_CRASH = (
    "outcome unknown: the gateway stopped after handing the message to the relay and "
    "before its answer was recorded; not sent again (at most once)"
)


class EmailNotConfigured(RuntimeError):
    """The SMTP password cannot be read: the gateway does not start."""


def load_password(settings: Settings) -> str | None:
    """The SMTP password: the first line of smtp_password_file, else the
    environment's AGENTMAIL_SMTP_PASSWORD (Settings.smtp_password), else None."""
    return password_from(settings.smtp_password_file, settings.smtp_password, "SMTP")


def password_from(file: Path | None, secret: SecretStr | None, what: str) -> str | None:
    """The first line of `file`, else `secret`, else None; EmailNotConfigured naming
    the file when it cannot be read or is empty (the SMTP and the IMAP password)."""
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise EmailNotConfigured(
                f"cannot read the {what} password file {file}: {exc}"
            ) from None
        line = text.splitlines()[0] if text else ""
        if not line:
            raise EmailNotConfigured(f"the {what} password file {file} is empty")
        return line
    if secret is not None:
        return secret.get_secret_value()
    return None


# --- enqueue: inside the caller's transaction ------------------------------------------


async def enqueue(
    s: AsyncSession,
    *,
    kind: str,
    user_id: str,
    address_id: str,
    to: str,
    build: Callable[[str], tuple[str, str]],
    request_id: str | None = None,
    person: str | None = None,
    session_id: str | None = None,
    mail_id: str | None = None,
) -> EmailOutboxRow:
    """Queue one e-mail in the caller's transaction. `build(outbox_id)` makes it:
    its Message-ID and its text (services/email_message.py). With `request_id`,
    the request's delivery log gets a `queued` row (channel email, the address as
    the device). `session_id`, `mail_id`: the thread and the mail it carries
    (kind `mail`). This process's sender is woken once the transaction commits
    (never if it rolls back)."""
    if kind not in KINDS:
        raise ValueError(f"unknown e-mail kind {kind!r}")
    outbox_id = new_id()
    mid, text = build(outbox_id)
    row = EmailOutboxRow(
        id=outbox_id,
        user_id=user_id,
        address_id=address_id,
        request_id=request_id,
        session_id=session_id,
        mail_id=mail_id,
        kind=kind,
        to_addr=to,
        message_id=mid,
        message=text,
        state="queued",
        attempts=0,
        next_at=utcnow(),
    )
    await outbox.queue(s, "email", row, request_id=request_id, person=person, device_name=to)
    return row


def configured_sender(s: AsyncSession) -> EmailSender | None:
    """This process's e-mail sender on the session's database, if the gateway
    sends e-mail (smtp_url set and the sender running), else None."""
    sender = outbox.sender_for(s, "email")
    return sender if isinstance(sender, EmailSender) else None


# --- the sender -------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    outbox_id: str
    attempts: int
    to_addr: str
    message: str
    request_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """`sent`, `retry`, `failed`, `unknown`; `lost`: the claim was taken over."""

    state: str
    code: int | None
    detail: str


class EmailSender(outbox.Sender):
    """Sends this gateway's queued e-mail; one per gateway process (app lifespan),
    made only when smtp_url is set."""

    kind = "email"
    log = log

    def __init__(self, settings: Settings, db: Database, password: str | None) -> None:
        super().__init__()
        assert settings.smtp_url is not None and settings.mail_from is not None
        self.settings = settings
        self.db = db
        self.relay: Relay = parse_relay(settings.smtp_url)
        self.mail_from = settings.mail_from
        self._password = password
        self.counts: collections.Counter[str] = collections.Counter()
        self._slots = anyio.CapacityLimiter(AT_ONCE)
        self._progress = anyio.Event()
        self._tls: ssl.SSLContext | None = None

    def poll_s(self) -> float:
        return self.settings.email_poll_s

    def on_pass_error(self) -> None:
        self.counts["pass_errors"] += 1

    def tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            cafile = self.settings.smtp_ca_file
            self._tls = ssl.create_default_context(cafile=str(cafile) if cafile else None)
        return self._tls

    async def run(self, stop: anyio.Event) -> None:
        """Passes until `stop`. A send in progress is not cut short (one cut after
        DATA would leave its outcome unknown): each SMTP step ends within TIMEOUT_S."""
        engine = self.db.writer.sync_engine
        self.attach(engine)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.loop_until, stop)
                await stop.wait()
                self._wake.set()
        finally:
            self.detach(engine)

    # one pass ----------------------------------------------------------------------------

    async def send_pass(self) -> float | None:
        await self._give_up_handed()
        while True:
            async with self.db.write() as s:
                won = await outbox.claim_due(s, EmailOutboxRow, LEASE_S, BATCH)
                claims = await self._load(s, won)
            if claims:
                async with anyio.create_task_group() as tg:
                    for claim in claims:
                        tg.start_soon(self._send_one, claim)
            if len(won) < BATCH:
                break
        async with self.db.read() as s:
            return await outbox.seconds_to_next(s, EmailOutboxRow)

    async def _load(self, s: AsyncSession, ids: list[str]) -> list[Claim]:
        if not ids:
            return []
        rows = await s.scalars(select(EmailOutboxRow).where(EmailOutboxRow.id.in_(ids)))
        return [
            Claim(r.id, r.attempts, r.to_addr, r.message or "", r.request_id, r.user_id)
            for r in rows
            if r.message  # erased only when final: never for a claimed row
        ]

    async def _give_up_handed(self) -> None:
        """Rows left `handed` by a sender whose lease ran out (it died between
        DATA and recording the answer): `unknown`, never sent again."""
        now = utcnow()
        async with self.db.write() as s:
            done = await s.execute(
                update(EmailOutboxRow)
                .where(EmailOutboxRow.state == "handed", EmailOutboxRow.claimed_until < now)
                .values(
                    state="unknown",
                    detail=UNKNOWN_AFTER_CRASH,
                    message=None,
                    claimed_until=None,
                    done_at=now,
                )
            )
        n = int(done.rowcount or 0)  # type: ignore[attr-defined]
        if n:
            self.counts["unknown"] += n
            log.warning("e-mail: %d message(s) left handed by a stopped sender: unknown", n)
            self._done()

    async def _send_one(self, claim: Claim) -> None:
        async with self._slots:
            try:
                outcome = await self._deliver(claim)
            except Exception as exc:  # a bug: recorded, never silent
                self.counts["errors"] += 1
                log.exception("e-mail %s to %s could not be sent", claim.outbox_id, claim.to_addr)
                outcome = Outcome("failed", None, f"could not be sent: {exc!r}")
        await self._record(claim, outcome)

    async def _deliver(self, claim: Claim) -> Outcome:
        """One SMTP conversation. Every step but DATA may fail and be retried."""
        relay = self.relay
        smtp = aiosmtplib.SMTP(
            hostname=relay.host,
            port=relay.port,
            use_tls=relay.implicit_tls,
            start_tls=False,  # decided below, after EHLO
            timeout=TIMEOUT_S,
            tls_context=self.tls_context(),
        )
        handed = False
        try:
            await smtp.connect()
            await smtp.ehlo()
            if not relay.implicit_tls:
                if smtp.supports_extension("starttls"):
                    await smtp.starttls()
                elif not relay.loopback:
                    return Outcome(
                        "failed",
                        None,
                        f"{relay.shown()} offers no STARTTLS: mail (and a password) are "
                        "sent in clear only to a loopback relay",
                    )
            if relay.username:
                await smtp.login(relay.username, self._password or "")
            await smtp.mail(self.mail_from)
            await smtp.rcpt(claim.to_addr)
            if not await self._hand(claim):
                return Outcome("lost", None, "claim taken over before DATA")
            handed = True
            answer = await smtp.data(claim.message)
            return Outcome("sent", answer.code, f"{answer.code} {answer.message}")
        except aiosmtplib.SMTPResponseException as exc:
            said = f"{exc.code} {exc.message}"
            return Outcome("retry" if 400 <= exc.code < 500 else "failed", exc.code, said)
        except aiosmtplib.SMTPNotSupported as exc:
            return Outcome("failed", None, f"{relay.shown()}: {exc}")
        except (aiosmtplib.SMTPException, OSError, TimeoutError, ssl.SSLError) as exc:
            said = f"{type(exc).__name__}: {exc}"
            if handed:
                return Outcome("unknown", None, f"outcome unknown after DATA: {said}")
            return Outcome("retry", None, f"{relay.shown()}: {said}")
        finally:
            if smtp.is_connected:
                try:
                    with anyio.fail_after(5):
                        await smtp.quit()
                except Exception:  # the outcome is known already; QUIT is politeness
                    smtp.close()

    async def _hand(self, claim: Claim) -> bool:
        """sending → handed, committed before DATA: from here on, never again."""
        async with self.db.write() as s:
            done = await s.execute(
                update(EmailOutboxRow)
                .where(outbox.mine(EmailOutboxRow, claim.outbox_id, claim.attempts))
                .values(state="handed")
            )
        return bool(done.rowcount == 1)  # type: ignore[attr-defined]

    async def _record(self, claim: Claim, outcome: Outcome) -> None:
        if outcome.state == "lost":
            self.counts["lost_claims"] += 1
            log.warning("e-mail %s: claim taken over by another sender", claim.outbox_id)
            return
        detail = outcome.detail[:DETAIL_CHARS]
        where = f"e-mail {claim.outbox_id} to {claim.to_addr}"
        if outcome.state == "retry" and claim.attempts >= MAX_ATTEMPTS:
            gave_up = f"failed after {claim.attempts} attempts: {detail}"
            outcome = Outcome("failed", outcome.code, gave_up)
            detail = outcome.detail[:DETAIL_CHARS]
        if outcome.state == "retry":
            self.counts["retried"] += 1
            wait = self.settings.email_retry_base_s * 2 ** (claim.attempts - 1)
            log.info("%s: %s; retry %d in %.1f s", where, detail, claim.attempts, wait)
            values: dict[str, Any] = {
                "state": "queued",
                "status_code": outcome.code,
                "detail": f"{detail} (retrying in {wait:.0f} s)",
                "claimed_until": None,
                "next_at": utcnow() + timedelta(seconds=wait),
            }
        else:
            self.counts[outcome.state] += 1
            if outcome.state == "sent":
                log.info("%s: sent, %s", where, detail)
            else:
                log.warning("%s: %s: %s", where, outcome.state, detail)
            values = {
                "state": outcome.state,
                "status_code": outcome.code,
                "detail": detail,
                "claimed_until": None,
                "message": None,  # it may hold a verification link
                "done_at": utcnow(),
            }
        async with self.db.write() as s:
            done = None
            for state in ("handed", "sending"):
                done = await s.execute(
                    update(EmailOutboxRow)
                    .where(outbox.mine(EmailOutboxRow, claim.outbox_id, claim.attempts, state))
                    .values(**values)
                )
                if done.rowcount == 1:  # type: ignore[attr-defined]
                    if claim.request_id is not None and outcome.state != "retry":
                        await self._delivery(s, claim, outcome.state, detail)
                    break
            else:
                self.counts["late"] += 1
                log.warning("%s: outcome %s came after the claim ended", where, outcome.state)
        if outcome.state == "retry":
            self.wake()  # the loop re-reads when the retry falls due
        self._done()

    async def _delivery(self, s: AsyncSession, claim: Claim, state: str, detail: str) -> None:
        """The request's tracking: what became of its e-mail to this address."""
        assert claim.request_id is not None
        person = await s.scalar(select(UserRow.username).where(UserRow.id == claim.user_id))
        s.add(
            RequestDeliveryRow(
                request_id=claim.request_id,
                channel="email",
                person=person,
                device_name=claim.to_addr,
                state=state,
                detail=detail,
            )
        )

    def _done(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    # waiting for outcomes (tests, and callers that want to say what happened) ----------

    async def wait_final(self, outbox_ids: Iterable[str], within_s: float) -> dict[str, str]:
        """The state of each of these rows once final, or as far as it got after
        `within_s` seconds (a removed address takes its rows: "removed")."""
        ids = list(outbox_ids)
        with anyio.move_on_after(within_s):
            while True:
                progress = self._progress
                states = await self._states(ids)
                if all(st in FINAL or st == "removed" for st in states.values()):
                    return states
                with anyio.move_on_after(0.5):  # another replica may be the sender
                    await progress.wait()
        return await self._states(ids)

    async def _states(self, ids: list[str]) -> dict[str, str]:
        async with self.db.read() as s:
            got = await s.execute(
                select(EmailOutboxRow.id, EmailOutboxRow.state).where(EmailOutboxRow.id.in_(ids))
            )
            rows = {row_id: state for row_id, state in got}
        return {i: rows.get(i, "removed") for i in ids}


async def queue_counts(s: AsyncSession) -> dict[str, int]:
    """How many outbox rows are in each state (shared by every replica)."""
    from sqlalchemy import func

    got = await s.execute(select(EmailOutboxRow.state, func.count()).group_by(EmailOutboxRow.state))
    return {state: int(n) for state, n in got}


async def sweep(s: AsyncSession, now: datetime) -> int:
    """Delete final outbox rows older than KEEP_DONE_S (the scheduler's sweep)."""
    done = await s.execute(
        delete(EmailOutboxRow).where(
            EmailOutboxRow.state.in_(FINAL),
            EmailOutboxRow.created_at < now - timedelta(seconds=KEEP_DONE_S),
        )
    )
    return int(done.rowcount or 0)  # type: ignore[attr-defined]
