"""Sending Web Push (docs/remote.md, "Push"): RFC 8030 delivery, RFC 8291 payload
encryption (aes128gcm, the `http-ece` library), RFC 8292 VAPID (the `py-vapid`
library), over httpx.

A push is a `push_outbox` row written by `enqueue` inside the transaction that
makes it necessary (a new request, a decision, a test), and sent after that
transaction commits: a rolled-back request is never pushed. `enqueue` asks the
session to wake this process's sender right after the commit; the sender also
wakes every `push_poll_s` (retries falling due, rows queued by other replicas).

Replicas share the outbox: a row is claimed by a conditional UPDATE
(queued → sending, `claimed_until` a lease, `attempts` + 1); only the UPDATE that
changed the row sends it, and the outcome is written only while `attempts`
still has the value of that claim. A claim left by a crashed process is taken
again once its lease is over. The claim, the loop and the waking are shared with
the e-mail outbox (services/outbox.py).

Outcomes (each counted in `PushSender.counts`, failures logged):
- 2xx: sent; the request's delivery row says `sent`, the push service's status
  code and how long it took to answer.
- 404/410: the subscription is gone; it is deleted (its queued pushes with it),
  the device keeps a notice its owner sees (`push_notice`, GET /api/v1/devices),
  deliveries say `failed` "410 gone: subscription removed".
- 429, 5xx, timeouts, connection errors: retried with exponential backoff
  (Retry-After honoured), MAX_ATTEMPTS in all, then `failed`.
- other 4xx (413 too large, 400, 403 a VAPID refusal): `failed` at once, with the
  first 200 characters of the push service's answer.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
import httpx
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.engine import Database
from mailui4agents.db.reach_tables import (
    DeviceRow,
    PushOutboxRow,
    PushSubscriptionRow,
    RequestDeliveryRow,
)
from mailui4agents.db.tables import UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.services import outbox
from mailui4agents.services.push_endpoints import (
    EndpointRefused,
    allowed_by_prefix,
    check_endpoint,
    guarded_transport,
    tls_context,
)
from mailui4agents.services.push_keys import VapidKey
from mailui4agents.services.push_wire import (
    DETAIL_CHARS,
    Answer,
    encrypt,
    push_headers,
    read_capped,
    retry_after_s,
    since_us,
)
from mailui4agents.settings import Settings

log = logging.getLogger("mailui4agents.push")

MAX_PAYLOAD = 3000  # bytes of JSON plaintext; encrypted it stays under the 4096 of RFC 8291
KINDS = frozenset(
    {"permission_request", "reminder", "escalation", "decided", "withdrawn", "test", "waiting"}
)
MAX_ATTEMPTS = 5
TIMEOUT_S = 10.0  # one POST, connection and answer included
LEASE_S = 60.0  # a claim older than this is taken again (its process died)
BATCH = 50
AT_ONCE = 16
KEEP_DONE_S = 86400.0  # sent/failed outbox rows are swept after a day (services/scheduler.py)
FINAL = ("sent", "failed")


def _compact(payload: JsonObject) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


# --- enqueue: inside the caller's transaction ------------------------------------------


async def enqueue(
    s: AsyncSession,
    *,
    subscription_id: str,
    request_id: str | None,
    kind: str,
    payload: JsonObject,
    person: str | None,
    device_id: str,
    device_name: str,
) -> str:
    """Queue one push in the caller's transaction; returns the outbox row's id.
    With `request_id`, the request's delivery log gets a `queued` row. The sender
    of this process is woken once the transaction commits (never if it rolls back).
    ValueError for an unknown kind or a payload over MAX_PAYLOAD bytes."""
    if kind not in KINDS:
        raise ValueError(f"unknown push kind {kind!r}")
    size = len(_compact(payload))
    if size > MAX_PAYLOAD:
        raise ValueError(f"push payload of {size} bytes is over {MAX_PAYLOAD}")
    row = PushOutboxRow(
        subscription_id=subscription_id,
        request_id=request_id,
        kind=kind,
        payload=payload,
        state="queued",
        attempts=0,
        next_at=utcnow(),
    )
    await outbox.queue(
        s,
        "push",
        row,
        request_id=request_id,
        person=person,
        device_id=device_id,
        device_name=device_name,
    )
    return row.id


# --- the sender -------------------------------------------------------------------------


@dataclass
class Claim:
    outbox_id: str
    attempts: int
    kind: str
    payload: JsonObject
    request_id: str | None
    subscription_id: str
    endpoint: str
    p256dh: str
    auth: str
    device_id: str
    device_name: str
    person: str


@dataclass(frozen=True)
class Result:
    status_code: int | None
    detail: str
    latency_ms: float | None


class PushSender(outbox.Sender):
    """Sends this gateway's queued pushes; one per gateway process (app lifespan)."""

    kind = "push"
    log = log

    def __init__(self, settings: Settings, db: Database, key: VapidKey) -> None:
        super().__init__()
        self.settings = settings
        self.db = db
        self.key = key
        self.subject = settings.vapid_subject_or_default()
        self.counts: collections.Counter[str] = collections.Counter()
        self.results: collections.OrderedDict[str, Result] = collections.OrderedDict()
        self._progress = anyio.Event()
        self._slots = anyio.CapacityLimiter(AT_ONCE)
        self._guarded: httpx.AsyncClient | None = None
        self._stopping = False
        self._posting: set[anyio.CancelScope] = set()
        self._allowed: httpx.AsyncClient | None = None

    def poll_s(self) -> float:
        return self.settings.push_poll_s

    def on_pass_error(self) -> None:
        self.counts["pass_errors"] += 1

    async def run(self, stop: anyio.Event) -> None:
        """Passes until `stop`: at once when woken, else when a retry falls due or
        every push_poll_s at the latest."""
        engine = self.db.writer.sync_engine
        self.attach(engine)
        timeout = httpx.Timeout(TIMEOUT_S)
        self._guarded = httpx.AsyncClient(
            transport=guarded_transport(), timeout=timeout, follow_redirects=False, trust_env=False
        )
        self._allowed = httpx.AsyncClient(
            verify=tls_context(), timeout=timeout, follow_redirects=False, trust_env=False
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.loop_until, stop)
                await stop.wait()
                # The pass in progress finishes its database work (cancelling an
                # aiosqlite call midway hangs the process on exit: services/
                # scheduler.py); only the POSTs waiting on push services are cut
                # short, and their pushes go back to the queue.
                self._stopping = True
                self._wake.set()
                for scope in list(self._posting):
                    scope.cancel()
        finally:
            self.detach(engine)
            with anyio.CancelScope(shield=True):
                await self._guarded.aclose()
                await self._allowed.aclose()

    # one pass ----------------------------------------------------------------------------

    async def send_pass(self) -> float | None:
        """Claim and send what is due; seconds until the next queued row falls due
        (None: nothing queued)."""
        while True:
            claims = await self._claim()
            if claims:
                async with anyio.create_task_group() as tg:
                    for claim in claims:
                        tg.start_soon(self._send_one, claim)
            if len(claims) < BATCH:
                break
        async with self.db.read() as s:
            return await outbox.seconds_to_next(s, PushOutboxRow)

    async def _claim(self) -> list[Claim]:
        out: list[Claim] = []
        async with self.db.write() as s:
            for outbox_id in await outbox.claim_due(s, PushOutboxRow, LEASE_S, BATCH):
                found = (
                    await s.execute(
                        select(PushOutboxRow, PushSubscriptionRow, DeviceRow.name, UserRow.username)
                        .join(
                            PushSubscriptionRow,
                            PushSubscriptionRow.id == PushOutboxRow.subscription_id,
                        )
                        .join(DeviceRow, DeviceRow.id == PushSubscriptionRow.device_id)
                        .join(UserRow, UserRow.id == DeviceRow.user_id)
                        .where(PushOutboxRow.id == outbox_id)
                    )
                ).first()
                if found is None:
                    continue  # its subscription went meanwhile (the row went with it)
                row, sub, device_name, person = found
                out.append(
                    Claim(
                        outbox_id=row.id,
                        attempts=row.attempts,
                        kind=row.kind,
                        payload=row.payload,
                        request_id=row.request_id,
                        subscription_id=sub.id,
                        endpoint=sub.endpoint,
                        p256dh=sub.p256dh,
                        auth=sub.auth,
                        device_id=sub.device_id,
                        device_name=device_name,
                        person=person,
                    )
                )
        return out

    async def _send_one(self, claim: Claim) -> None:
        async with self._slots:
            try:
                answer = await self._post(claim)
            except EndpointRefused as exc:
                self.counts["refused"] += 1
                log.warning("push to %s refused: %s", claim.device_name, exc)
                await self._finish(claim, "failed", None, f"endpoint refused: {exc}", None)
                return
            except Exception as exc:  # a bug or an odd key: recorded, never silent
                self.counts["errors"] += 1
                log.exception("push to %s could not be made", claim.device_name)
                detail = f"push to {claim.device_name} could not be made: {exc!r}"[:500]
                await self._finish(claim, "failed", None, detail, None)
                return
        await self._record(claim, answer)

    async def _post(self, claim: Claim) -> Answer:
        """One POST; an Answer for every outcome but a refused endpoint. Cut short
        (an Answer without status, so the push is retried) when the gateway stops."""
        started = time.perf_counter()
        scope = anyio.CancelScope()
        if self._stopping:
            scope.cancel()
        self._posting.add(scope)
        try:
            with scope:
                return await self._post_now(claim, started)
        finally:
            self._posting.discard(scope)
        return Answer(None, "the gateway stopped before the push service answered", 0)

    async def _post_now(self, claim: Claim, started: float) -> Answer:
        allowed = allowed_by_prefix(claim.endpoint, self.settings.push_endpoint_allow)
        client = self._allowed if allowed else self._guarded
        assert client is not None  # run() made them
        body = encrypt(_compact(claim.payload), claim.p256dh, claim.auth)
        headers = push_headers(self.key, claim.endpoint, self.subject, claim.kind, claim.payload)
        try:
            with anyio.fail_after(TIMEOUT_S):
                if not allowed:  # shape and DNS, now: they may have changed since
                    await check_endpoint(claim.endpoint, ())
                async with client.stream(
                    "POST", claim.endpoint, content=body, headers=headers
                ) as response:
                    text = await read_capped(response)
        except TimeoutError:
            return Answer(None, f"no answer within {TIMEOUT_S:.0f} s", since_us(started))
        except httpx.HTTPError as exc:
            return Answer(None, f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS], since_us(started))
        return Answer(
            response.status_code,
            text,
            since_us(started),
            retry_after_s(response.headers.get("retry-after")),
        )

    async def _record(self, claim: Claim, answer: Answer) -> None:
        status, name = answer.status, claim.device_name
        if status is not None and 200 <= status < 300:
            self.counts["sent"] += 1
            await self._finish(claim, "sent", status, str(status), answer.latency_us)
        elif status in (404, 410):
            self.counts["gone"] += 1
            log.warning("push to %s: %s gone, subscription removed", name, status)
            await self._gone(claim, status, answer.latency_us)
        elif status is None or status == 429 or status >= 500:
            said = answer.detail if status is None else f"{status} {answer.detail}".strip()
            if claim.attempts >= MAX_ATTEMPTS:
                self.counts["failed"] += 1
                detail = f"push to {name} failed after {claim.attempts} attempts: {said}"
                log.warning("%s", detail)
                await self._finish(claim, "failed", status, detail, answer.latency_us)
            else:
                self.counts["retried"] += 1
                wait = self.settings.push_retry_base_s * 2 ** (claim.attempts - 1)
                if answer.retry_after is not None:
                    wait = max(wait, answer.retry_after)
                log.info("push to %s: %s; retry %d in %.1f s", name, said, claim.attempts, wait)
                await self._retry(claim, status, f"{said} (retrying in {wait:.1f} s)", wait)
        else:
            self.counts["failed"] += 1
            detail = f"push to {name} failed: {status} {answer.detail}".strip()
            log.warning("%s", detail)
            await self._finish(claim, "failed", status, detail, answer.latency_us)

    def _mine(self, claim: Claim) -> Any:
        return outbox.mine(PushOutboxRow, claim.outbox_id, claim.attempts)

    async def _finish(
        self,
        claim: Claim,
        state: str,
        status: int | None,
        detail: str,
        latency_us: int | None,
    ) -> None:
        async with self.db.write() as s:
            done = await s.execute(
                update(PushOutboxRow)
                .where(self._mine(claim))
                .values(state=state, status_code=status, detail=detail, claimed_until=None)
            )
            if done.rowcount != 1:  # type: ignore[attr-defined]
                return  # re-claimed after our lease ran out: the other sender records
            if state == "sent":
                await s.execute(
                    update(PushSubscriptionRow)
                    .where(PushSubscriptionRow.id == claim.subscription_id)
                    .values(last_ok_at=utcnow())
                )
            if claim.request_id is not None:
                s.add(self._delivery(claim, state, detail, latency_us))
        self._done(claim, status, detail, latency_us)

    async def _retry(self, claim: Claim, status: int | None, detail: str, wait: float) -> None:
        async with self.db.write() as s:
            await s.execute(
                update(PushOutboxRow)
                .where(self._mine(claim))
                .values(
                    state="queued",
                    status_code=status,
                    detail=detail,
                    claimed_until=None,
                    next_at=utcnow() + timedelta(seconds=wait),
                )
            )
        self.wake()  # the loop re-reads when the retry falls due

    async def _gone(self, claim: Claim, status: int, latency_us: int) -> None:
        detail = f"{status} gone: subscription removed"
        notice = (
            f"Push notifications to {claim.device_name} stopped on "
            f"{utcnow():%Y-%m-%d %H:%M} UTC: the push service answered {status} "
            "(the browser dropped its subscription). Turn notifications on again on that device."
        )
        async with self.db.write() as s:
            mine = await s.scalar(select(PushOutboxRow.id).where(self._mine(claim)))
            if mine is None:
                return
            if claim.request_id is not None:  # a "waiting" or test push has no log
                s.add(self._delivery(claim, "failed", detail, latency_us))
            # Its other queued pushes die with it: their requests say so too.
            others = await s.execute(
                select(PushOutboxRow.request_id).where(
                    PushOutboxRow.subscription_id == claim.subscription_id,
                    PushOutboxRow.id != claim.outbox_id,
                    PushOutboxRow.state.in_(("queued", "sending")),
                    PushOutboxRow.request_id.is_not(None),
                )
            )
            for (request_id,) in others:
                s.add(
                    RequestDeliveryRow(
                        request_id=request_id,
                        channel="push",
                        person=claim.person,
                        device_id=claim.device_id,
                        device_name=claim.device_name,
                        state="failed",
                        detail=detail,
                    )
                )
            await s.execute(
                update(DeviceRow).where(DeviceRow.id == claim.device_id).values(push_notice=notice)
            )
            await s.execute(
                delete(PushSubscriptionRow).where(PushSubscriptionRow.id == claim.subscription_id)
            )
        self._done(claim, status, detail, latency_us)

    def _delivery(
        self, claim: Claim, state: str, detail: str, latency_us: int | None
    ) -> RequestDeliveryRow:
        assert claim.request_id is not None
        return RequestDeliveryRow(
            request_id=claim.request_id,
            channel="push",
            person=claim.person,
            device_id=claim.device_id,
            device_name=claim.device_name,
            state=state,
            detail=detail,
            latency_us=latency_us,
        )

    def _done(self, claim: Claim, status: int | None, detail: str, latency_us: int | None) -> None:
        latency = None if latency_us is None else latency_us / 1000
        self.results[claim.outbox_id] = Result(status, detail, latency)
        while len(self.results) > 1000:
            self.results.popitem(last=False)
        self._progress.set()
        self._progress = anyio.Event()

    # waiting for outcomes (agentmail notify test) ----------------------------------------

    async def wait_final(self, outbox_ids: Iterable[str], within_s: float) -> dict[str, Result]:
        """The outcome of each of these pushes once final (sent, failed, or its
        subscription removed), or as far as it got after `within_s` seconds."""
        ids = list(outbox_ids)
        with anyio.move_on_after(within_s):
            while True:
                progress = self._progress
                out, final = await self._outcomes(ids)
                if final:
                    return out
                with anyio.move_on_after(0.5):  # another replica may be the sender
                    await progress.wait()
        return (await self._outcomes(ids))[0]

    async def _outcomes(self, ids: list[str]) -> tuple[dict[str, Result], bool]:
        async with self.db.read() as s:
            rows = {
                r.id: r
                for r in await s.scalars(select(PushOutboxRow).where(PushOutboxRow.id.in_(ids)))
            }
        out: dict[str, Result] = {}
        final = True
        for i in ids:
            row = rows.get(i)
            known = self.results.get(i)
            if row is None:  # deleted with its subscription (404/410)
                out[i] = known or Result(None, "subscription removed", None)
            elif row.state in FINAL:
                latency = known.latency_ms if known else None
                out[i] = Result(row.status_code, row.detail or row.state, latency)
            else:
                final = False
                out[i] = Result(row.status_code, row.detail or row.state, None)
        return out, final


async def sweep(s: AsyncSession, now: datetime) -> int:
    """Delete sent and failed outbox rows older than KEEP_DONE_S (the scheduler's
    sweep); the request's delivery rows keep what happened."""
    done = await s.execute(
        delete(PushOutboxRow).where(
            PushOutboxRow.state.in_(FINAL),
            PushOutboxRow.created_at < now - timedelta(seconds=KEEP_DONE_S),
        )
    )
    return int(done.rowcount or 0)  # type: ignore[attr-defined]
