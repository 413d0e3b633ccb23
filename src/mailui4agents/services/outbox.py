"""What the two outboxes share: Web Push (services/push_send.py) and e-mail
(services/email_send.py). Each is a table of rows to send, written in the
transaction that made them necessary and sent after it commits.

Replicas share an outbox: a row is claimed by a conditional UPDATE (queued →
sending, `claimed_until` a lease, `attempts` + 1); only the UPDATE that changed
the row sends it, and an outcome is written only while `attempts` still has the
value of that claim (`mine`). A claim left by a crashed process is taken again
once its lease is over (`claimable`).

An outbox table has the columns `id`, `state`, `next_at`, `claimed_until` and
`attempts`; the functions here take the row class.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from datetime import datetime, timedelta
from typing import Any

import anyio
from sqlalchemy import and_, event, func, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import RequestDeliveryRow
from mailui4agents.db.types import utcnow


def claimable(table: Any, now: datetime) -> Any:
    """Due and queued, or claimed by a sender whose lease ran out."""
    return or_(
        and_(table.state == "queued", table.next_at <= now),
        and_(table.state == "sending", table.claimed_until < now),
    )


async def claim_due(s: AsyncSession, table: Any, lease_s: float, batch: int) -> list[str]:
    """Claim up to `batch` due rows in this transaction; the ids this caller won
    (another replica's UPDATE may win a row first: it is skipped)."""
    now = utcnow()
    lease = now + timedelta(seconds=lease_s)
    ids = (
        await s.scalars(
            select(table.id).where(claimable(table, now)).order_by(table.next_at).limit(batch)
        )
    ).all()
    won: list[str] = []
    for row_id in ids:
        done = await s.execute(
            update(table)
            .where(table.id == row_id, claimable(table, now))
            .values(state="sending", claimed_until=lease, attempts=table.attempts + 1)
        )
        if done.rowcount == 1:  # type: ignore[attr-defined]
            won.append(row_id)
    return won


def mine(table: Any, row_id: str, attempts: int, state: str = "sending") -> Any:
    """Still this claim's row: nobody re-claimed it since (attempts unchanged)."""
    return and_(table.id == row_id, table.state == state, table.attempts == attempts)


async def seconds_to_next(s: AsyncSession, table: Any) -> float | None:
    """Seconds until the next queued row falls due (None: nothing queued)."""
    nxt = await s.scalar(select(func.min(table.next_at)).where(table.state == "queued"))
    if nxt is None:
        return None
    return float((nxt - utcnow()).total_seconds())


class Sender:
    """The loop of one outbox's sender in one gateway process: a pass at once
    when woken (after a commit that queued a row, or a retry), else when the
    next row falls due, else every `poll_s` (rows queued by other replicas).
    Subclasses give `send_pass`, `poll_s` and `log`."""

    kind = "outbox"  # the wake registry's key, and the session flag's name
    log = logging.getLogger("mailui4agents.outbox")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = anyio.Event()
        self.pass_errors = 0

    def poll_s(self) -> float:
        raise NotImplementedError

    async def send_pass(self) -> float | None:
        """Send what is due; seconds until the next row falls due (None: nothing)."""
        raise NotImplementedError

    def on_pass_error(self) -> None:
        self.pass_errors += 1

    def wake(self) -> None:
        """Run a pass now. Safe from any thread (a commit in a test's own loop)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    def attach(self, engine: Engine) -> None:
        """Called by `run` in the loop it sends from: commits on `engine` wake it."""
        self._loop = asyncio.get_running_loop()
        _registry(self.kind)[engine] = self

    def detach(self, engine: Engine) -> None:
        reg = _registry(self.kind)
        if reg.get(engine) is self:
            del reg[engine]

    async def loop_until(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            self._wake = anyio.Event()  # before the pass: a wake during it is kept
            wait = self.poll_s()
            try:
                due = await self.send_pass()
                if due is not None:
                    wait = min(wait, max(due, 0.0))
            except Exception:  # a database hiccup must not end the sender
                self.on_pass_error()
                self.log.exception("%s: a send pass failed; next pass in %.1f s", self.kind, wait)
            with anyio.move_on_after(wait):
                await self._wake.wait()


_SENDERS: dict[str, weakref.WeakKeyDictionary[Engine, Sender]] = {}


def _registry(kind: str) -> weakref.WeakKeyDictionary[Engine, Sender]:
    return _SENDERS.setdefault(kind, weakref.WeakKeyDictionary())


def sender_for(s: AsyncSession, kind: str) -> Sender | None:
    """This process's `kind` sender on the database of `s` (None: there is none)."""
    engine = getattr(s.bind, "sync_engine", None)
    return _registry(kind).get(engine) if isinstance(engine, Engine) else None


def wake_after_commit(s: AsyncSession, kind: str) -> None:
    """Wake this process's `kind` sender once `s` commits (never if it rolls
    back). No sender here: another replica's poll picks the rows up."""
    flag = f"{kind}_wake"
    if s.info.get(flag):
        return
    sender = sender_for(s, kind)
    if sender is None:
        return
    s.info[flag] = True
    event.listen(s.sync_session, "after_commit", lambda _session: sender.wake(), once=True)


async def queue(
    s: AsyncSession,
    kind: str,
    row: Any,
    *,
    request_id: str | None,
    person: str | None,
    device_id: str | None = None,
    device_name: str | None = None,
) -> None:
    """Add an outbox row and, for a request's, its `queued` line in the request's
    deliveries (channel `kind`); the sender is woken when the transaction commits."""
    s.add(row)
    if request_id is not None:
        s.add(
            RequestDeliveryRow(
                request_id=request_id,
                channel=kind,
                person=person,
                device_id=device_id,
                device_name=device_name,
                state="queued",
            )
        )
    await s.flush()
    wake_after_commit(s, kind)
