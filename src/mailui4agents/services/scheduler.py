"""Periodic work of the gateway: expiring unanswered requests, delivering calendar
entries that fell due, and (at most hourly) sweeping attachments and blobs that
no mail needs. The clock is a parameter, so tests move time instead of sleeping.

With several replicas on PostgreSQL each job's write transaction first tries a
per-job advisory lock (`run_once`): one replica does the pass, the others skip
it, and since every job decides what to do only after taking the lock (READ
COMMITTED: each statement sees what committed before), a pass never repeats
work another replica committed. The writes stay conditional as well (e.g.
`status = 'pending'` in permissions._close, the calendar's claim on `next_due`
in services/calendar_due.py). docs/postgres.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.types import utcnow
from mailui4agents.events import log as event_log
from mailui4agents.services import (
    blobs,
    calendar_due,
    email_digest,
    email_send,
    notify_due,
    permissions,
    push_send,
    retention,
    waiting,
)
from mailui4agents.state import Gateway

log = logging.getLogger("mailui4agents.scheduler")

# The sweep scans tables and a directory; uploads wait 48 h anyway, so hourly is plenty.
SWEEP_EVERY_S = 3600.0
# Occurrences delivered per pass at most (one write transaction each); the rest wait
# for the next pass, so a long catch-up never holds the writer for long.
CALENDAR_PER_PASS = 200
# Reminders and escalations are set in whole minutes: a pass every 10 s is plenty.
NOTIFY_EVERY_S = 10.0

Clock = Callable[[], datetime]


# One advisory lock key per job (any constants, distinct from events/log.py's).
JOB_LOCKS = {
    "expire": 0x6A6F6201,
    "sweep": 0x6A6F6202,
    "calendar": 0x6A6F6203,
    "notify": 0x6A6F6204,
    "digest": 0x6A6F6205,
    "compact": 0x6A6F6206,
    "retain": 0x6A6F6207,
}
# Compactions one sweep runs at most (each deletes up to log.COMPACT_MOST events in
# its own transaction); a longer backlog is worked off by the next sweeps.
COMPACTIONS_PER_SWEEP = 20
# Retention batches one sweep runs at most per kind (retention.BATCH rows each).
RETENTION_BATCHES = 20


async def run_once(s: AsyncSession, job: str) -> bool:
    """True when this transaction may run `job`'s pass: always on SQLite (one
    process), on PostgreSQL only for the replica holding the job's lock (until
    this transaction ends; the others get False at once and skip the pass)."""
    if s.get_bind().dialect.name != "postgresql":
        return True
    got = await s.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": JOB_LOCKS[job]})
    return bool(got)


async def tick(gw: Gateway) -> int:
    """One pass; returns how many requests expired. Reads first, so an idle
    gateway never takes the write lock."""
    async with gw.read() as s:
        if not await permissions.any_due(s):
            return 0
    async with gw.write() as s:
        if not await run_once(s, "expire"):
            return 0
        return await permissions.expire_due(s)


async def deliver_calendar(gw: Gateway, now: datetime | None = None) -> int:
    """Deliver every calendar occurrence due at `now`, each in its own write
    transaction (services/calendar_due.py claims it); returns how many were sent.
    Reads first, so an idle gateway never takes the write lock."""
    now = now or utcnow()
    sent = 0
    tried = 0
    while tried < CALENDAR_PER_PASS:
        async with gw.read() as s:
            batch = await calendar_due.due(s, now, min(50, CALENDAR_PER_PASS - tried))
        if not batch:
            break
        for d in batch:
            tried += 1
            async with gw.write() as s:
                if not await run_once(s, "calendar"):
                    return sent  # another replica is delivering this pass
                sent += await calendar_due.deliver_one(s, gw.settings, d, now)
    return sent


async def remind_and_escalate(
    gw: Gateway, now: datetime | None = None, sender: notify_due.Sender = notify_due.push_sender
) -> notify_due.Result:
    """Push the reminders and escalations due at `now` (services/notify_due.py),
    each claimed in its own write transaction. Reads first, so a gateway with
    nothing due never takes the write lock."""
    now = now or utcnow()
    result = notify_due.Result()
    async with gw.read() as s:
        batch = await notify_due.plan(s, now)
    for due in batch:
        async with gw.write() as s:
            if not await run_once(s, "notify"):
                return result  # another replica is doing this pass
            if not await notify_due.claim(s, due):
                continue  # decided meanwhile, or claimed by another pass
            result.pushed += await notify_due.send(s, due, sender)
        result.claimed += 1
        result.skipped += len(due.step.skipped)
    if result.claimed:
        log.info(
            "notify: %d step(s) claimed, %d push(es) queued, %d person(s) skipped",
            result.claimed,
            result.pushed,
            result.skipped,
        )
    return result


async def send_digests(gw: Gateway, now: datetime | None = None) -> email_digest.Result:
    """Queue the daily digests due at `now` (services/email_digest.py), each
    claimed in its own write transaction. A gateway that sends no e-mail reads
    nothing; one with nobody due never takes the write lock."""
    result = email_digest.Result()
    sender = gw.email
    if sender is None:
        return result
    now = now or utcnow()
    async with gw.read() as s:
        batch = await email_digest.plan(s, now)
    for due in batch:
        async with gw.write() as s:
            if not await run_once(s, "digest"):
                return result  # another replica is doing this pass
            if not await email_digest.claim(s, due):
                continue  # claimed by another pass, or the digest turned off
            queued = await email_digest.send(s, due, now, sender)
        result.claimed += 1
        result.queued += queued
        result.empty += queued == 0
    if result.claimed:
        log.info(
            "digest: %d day(s) claimed, %d e-mail(s) queued, %d with nothing to say",
            result.claimed,
            result.queued,
            result.empty,
        )
    return result


async def sweep_blobs(gw: Gateway, now: datetime | None = None) -> blobs.SweepResult:
    """One sweep (docs/behaviour.md#attachments). Reads first, so a gateway with nothing to sweep
    never takes the write lock."""
    now = now or utcnow()
    grace = timedelta(seconds=gw.settings.blob_grace_s)
    store = blobs.BlobStore.for_settings(gw.settings)
    await anyio.to_thread.run_sync(blobs.sweep_temp, store, now, grace)
    async with gw.read() as s:
        if not await blobs.anything_to_sweep(s, now, grace):
            return blobs.SweepResult()
    async with gw.write() as s:
        if not await run_once(s, "sweep"):
            return blobs.SweepResult()
        result = await blobs.sweep(s, store, now, grace)
    log.info("swept %d attachment(s) and %d blob(s)", result.attachments, result.blobs)
    return result


async def compact_events(gw: Gateway, now: datetime | None = None) -> int:
    """Compact events older than `event_retention_days` (docs/behaviour.md#live-events-sse);
    how many were deleted. Reads first, so there is no write when nothing is due."""
    days = gw.settings.event_retention_days
    if days == 0:
        return 0
    before = (now or utcnow()) - timedelta(days=days)
    deleted = 0
    for _ in range(COMPACTIONS_PER_SWEEP):
        async with gw.read() as s:
            point = await event_log.compaction_point(s, before)
        if point == 0:
            break
        async with gw.write() as s:
            if not await run_once(s, "compact"):
                break
            deleted += await event_log.compact(s, point)
    return deleted


async def apply_retention(gw: Gateway, now: datetime | None = None) -> tuple[int, int]:
    """Delete read-log rows and finished requests past their retention
    (docs/behaviour.md#live-events-sse); (read-log rows, requests) deleted. Reads first,
    so there is no write when nothing is due; at most RETENTION_BATCHES batches each."""
    cut = retention.Cutoffs.of(
        now or utcnow(), gw.settings.read_log_retention_days, gw.settings.request_retention_days
    )
    counts = [0, 0]
    kinds = (
        (0, cut.read_log, retention.read_log_due, retention.sweep_read_log),
        (1, cut.requests, retention.requests_due, retention.sweep_requests),
    )
    for slot, before, due, sweep in kinds:
        if before is None:
            continue
        for _ in range(RETENTION_BATCHES):
            async with gw.read() as s:
                if not await due(s, before):
                    break
            async with gw.write() as s:
                if not await run_once(s, "retain"):
                    break
                done = await sweep(s, before)
            counts[slot] += done
            if done == 0:
                break
    if any(counts):
        log.info("retention: deleted %d read-log row(s) and %d finished request(s)", *counts)
    return counts[0], counts[1]


async def run(gw: Gateway, stop: anyio.Event, clock: Clock = utcnow) -> None:
    """Run until `stop` is set; a failed pass is logged and retried on the next tick.

    Shutdown waits for the pass in progress instead of cancelling it: cancelling
    an aiosqlite call midway left its connection's close pending forever, and the
    process hung on exit."""
    last_sweep: float | None = None
    last_notify: float | None = None
    while not stop.is_set():
        started = time.monotonic()
        try:
            await tick(gw)
        except Exception:  # keep the scheduler alive; the next pass retries
            log.exception("scheduler pass failed")
        try:
            await deliver_calendar(gw, clock())
        except Exception:  # nothing was claimed by a failed transaction; retried
            log.exception("calendar pass failed")
        if last_notify is None or anyio.current_time() - last_notify >= NOTIFY_EVERY_S:
            last_notify = anyio.current_time()
            try:
                await remind_and_escalate(gw, clock())
            except Exception:  # a failed step's claim rolled back; the next pass retries
                log.exception("reminder/escalation pass failed")
            try:
                await send_digests(gw, clock())
            except Exception:  # a failed digest's claim rolled back; the next pass retries
                log.exception("digest pass failed")
        if last_sweep is None or anyio.current_time() - last_sweep >= SWEEP_EVERY_S:
            last_sweep = anyio.current_time()
            try:
                await sweep_blobs(gw, clock())
            except Exception:  # the next sweep retries
                log.exception("blob sweep failed")
            try:
                await compact_events(gw, clock())
            except Exception:  # the next sweep retries
                log.exception("event compaction failed")
            try:
                await apply_retention(gw, clock())
            except Exception:  # the next sweep retries
                log.exception("retention sweep failed")
            try:  # pushes sent or failed a day ago (their requests' deliveries stay)
                async with gw.write() as s:
                    await push_send.sweep(s, clock())
                    await email_send.sweep(s, clock())
                    await waiting.sweep(s, clock())
            except Exception:  # the next sweep retries
                log.exception("push or e-mail outbox sweep failed")
        gw.scheduler_done_at = time.monotonic()  # its lag (metrics.py)
        if gw.metrics is not None:
            gw.metrics.scheduler_pass.observe(gw.scheduler_done_at - started)
        with anyio.move_on_after(gw.settings.scheduler_interval_s):
            await stop.wait()
