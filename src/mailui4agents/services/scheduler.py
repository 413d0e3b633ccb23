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
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.types import utcnow
from mailui4agents.services import blobs, calendar_due, permissions
from mailui4agents.state import Gateway

log = logging.getLogger("mailui4agents.scheduler")

# The sweep scans tables and a directory; uploads wait 48 h anyway, so hourly is plenty.
SWEEP_EVERY_S = 3600.0
# Occurrences delivered per pass at most (one write transaction each); the rest wait
# for the next pass, so a long catch-up never holds the writer for long.
CALENDAR_PER_PASS = 200

Clock = Callable[[], datetime]


# One advisory lock key per job (any constants, distinct from events/log.py's).
JOB_LOCKS = {"expire": 0x6A6F6201, "sweep": 0x6A6F6202, "calendar": 0x6A6F6203}


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


async def run(gw: Gateway, stop: anyio.Event, clock: Clock = utcnow) -> None:
    """Run until `stop` is set; a failed pass is logged and retried on the next tick.

    Shutdown waits for the pass in progress instead of cancelling it: cancelling
    an aiosqlite call midway left its connection's close pending forever, and the
    process hung on exit."""
    last_sweep: float | None = None
    while not stop.is_set():
        try:
            await tick(gw)
        except Exception:  # keep the scheduler alive; the next pass retries
            log.exception("scheduler pass failed")
        try:
            await deliver_calendar(gw, clock())
        except Exception:  # nothing was claimed by a failed transaction; retried
            log.exception("calendar pass failed")
        if last_sweep is None or anyio.current_time() - last_sweep >= SWEEP_EVERY_S:
            last_sweep = anyio.current_time()
            try:
                await sweep_blobs(gw, clock())
            except Exception:  # the next sweep retries
                log.exception("blob sweep failed")
        with anyio.move_on_after(gw.settings.scheduler_interval_s):
            await stop.wait()
