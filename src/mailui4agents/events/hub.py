"""In-process fan-out for open streams. The log is the truth; the hub only saves
streams from reading it themselves.

A commit in this process hands the hub the rows it just appended (`publish`):
when they are provably the next ones after what the hub handed out (its cursor
+ 1, contiguous, no read in progress) they go to the streams at once, without
reading them back. Otherwise, and for commits of other processes, one reader
task reads the log (wake-ups that arrive while it reads are coalesced into the
next read) and hands each new row to the open streams of the row's principal,
in memory. A stream reads the log itself only
when it opens (replay from Last-Event-ID) and when the hub tells it to (its
queue overflowed, or the shared read failed): a missed hand-off costs a read,
never an event. Token re-checks are asked for by revocations (`recheck`), not
by events. See docs/design.md, "Events".

Nothing here runs per stream on a timer: the hub's one-second clock raises each
stream's keep-alive (`ping`) and token expiry, and re-checks the tokens of all
open streams in one query every `recheck_s` (5,000 streams re-checking their own
token every 15 s were 333 reads a second; bench/streams.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio

from mailui4agents.db.types import utcnow

log = logging.getLogger("mailui4agents.events")

TICK_S = 1.0  # how late an expired token's stream may end, at most


def sse_data(data: Any) -> str:
    """An event's data as its SSE `data:` line (one line of JSON: JSON escapes CR/LF)."""
    return json.dumps(data, ensure_ascii=False)


def sse_frame(event_id: int, type_: str, data: Any) -> bytes:
    """One event as SSE bytes."""
    return sse_frame_of(event_id, type_, sse_data(data))


def sse_frame_of(event_id: int, type_: str, payload: str) -> bytes:
    """One event as SSE bytes, its data already `sse_data` (one payload is often
    every recipient's: encoded once for all their frames)."""
    return f"id: {event_id}\r\nevent: {type_}\r\ndata: {payload}\r\n\r\n".encode()


@dataclass(frozen=True)
class LiveEvent:
    """One log row as the hub hands it out, encoded once for all its streams."""

    id: int
    principal: str
    frame: bytes

    @classmethod
    def of(cls, event_id: int, principal: str, type_: str, data: Any) -> LiveEvent:
        return cls(event_id, principal, sse_frame(event_id, type_, data))


# Reads the log after an id, all principals, oldest first, at most `limit` rows.
ReadAfter = Callable[[int, int], Awaitable[list[LiveEvent]]]
# The newest id of the log (0 when empty).
ReadHead = Callable[[], Awaitable[int]]
# Of these tokens, the ones that still work, each with the time it stops (None:
# until revoked). One query for all open streams.
CheckTokens = Callable[[set[str]], Awaitable[dict[str, datetime | None]]]


@dataclass(eq=False)
class Subscription:
    """One open stream. The hub fills `rows`, sets `wake`, and raises `reread`
    when the stream must read the log itself from its own cursor. Small on
    purpose (a list, not a deque; no task, no timer): there may be thousands."""

    principal: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    rows: list[LiveEvent] = field(default_factory=list)
    reread: bool = True  # a new stream replays from the log first
    recheck: bool = False
    keep_rows: bool = True  # False: only woken (a long-poll that re-reads its row)
    # The hub hands this stream every row with an id above `covered` (None: not
    # known, the stream must replay from the log).
    covered: int | None = None
    # The hub's clock raises `recheck` when the token expires (wall clock), and
    # `ping` when a keep-alive is due (monotonic): streams have no timers of their
    # own. `token` is re-checked with all the others' every recheck_s.
    until: datetime | None = None
    token: str | None = None
    ping: bool = False
    next_ping: float = math.inf
    closed: bool = False  # the client left, or the gateway shuts down


class EventHub:
    def __init__(
        self,
        max_queue: int = 1000,
        batch: int = 500,
        poll_s: float = 15.0,
        *,
        ping_s: float = 15.0,
        recheck_s: float = 15.0,
    ) -> None:
        self._subs: dict[str, set[Subscription]] = defaultdict(set)
        self.ping_s = ping_s
        self._recheck_s = recheck_s
        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._max_queue = max_queue
        self._batch = batch
        # Also read every poll_s without a wake-up: a commit made by another
        # gateway process (replicas on PostgreSQL) has no in-process notify.
        self._poll_s = poll_s
        # Newest id the reader has handed out; None while no stream is open (then
        # nothing is read, and the first stream to open sets it from the log head).
        self._cursor: int | None = None
        self._wake = asyncio.Event()
        self._closed = False
        self._read_after: ReadAfter | None = None
        self._read_head: ReadHead | None = None
        self._check_tokens: CheckTokens | None = None
        self._reading = False  # the reader task is inside `_read_all`
        self.shared_reads = 0  # log reads done by the reader task (for tests and metrics)
        # This gateway's name in its PostgreSQL NOTIFYs (events/log.py, REPLICA):
        # its listener skips them, its commits reach the hub in-process.
        self.replica = secrets.token_hex(8)
        self.direct = 0  # commits handed out as published, without a read (tests, metrics)
        self.token_checks = 0  # batched token re-checks (for tests and metrics)

    # -- streams -------------------------------------------------------------------

    async def subscribe(
        self, principal: str, *, keep_rows: bool = True, reread: bool = True
    ) -> Subscription:
        """Register a stream. Returned once the hub hands this stream every row
        with an id above `sub.covered`; with `reread` (the default) the stream
        must read the log once before trusting `rows`. A stream that starts at
        or after `covered` may pass `reread=False` and never read the log: rows
        are queued from now on. With `keep_rows` False the subscription is only
        woken by its principal's new rows."""
        if self._draining:
            raise RuntimeError("the gateway is shutting down")
        sub = Subscription(principal, reread=keep_rows and reread, keep_rows=keep_rows)
        self._subs[principal].add(sub)
        try:
            if self._cursor is None and self._read_head is not None:
                head = await self._read_head()
                if self._cursor is None:
                    self._cursor = head
                    self._wake.set()  # commits seen while unset were not read
        except BaseException:
            self.unsubscribe(sub)
            raise
        sub.covered = self._cursor
        return sub

    @asynccontextmanager
    async def waiter(self, principal: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever `principal` gets new rows (for long-polls)."""
        sub = await self.subscribe(principal, keep_rows=False)
        try:
            yield sub.wake
        finally:
            self.unsubscribe(sub)

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.principal)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.principal]

    @property
    def listening(self) -> bool:
        """Some stream or long-poll is open (else a commit's rows go nowhere)."""
        return bool(self._subs)

    def connected(self, principal: str) -> int:
        return len(self._subs.get(principal, ()))

    def open_by_kind(self) -> dict[str, int]:
        """Open streams by kind: `agent` and `human` event streams, `wait` long-polls
        (read when /metrics is scraped, metrics.py)."""
        counts = {"agent": 0, "human": 0, "wait": 0}
        for principal, subs in list(self._subs.items()):
            streams = sum(1 for sub in subs if sub.keep_rows)
            counts["wait"] += len(subs) - streams
            counts["human" if principal.startswith("user:") else "agent"] += streams
        return counts

    # -- writers -------------------------------------------------------------------

    def notify(self, principals: Iterable[str]) -> None:
        """Called after a commit that appended events: one shared read follows."""
        del principals  # any open stream may be among them; the read filters
        if self._subs:
            self._wake.set()

    def publish(self, events: Sequence[LiveEvent]) -> None:
        """Called after a commit with the rows it appended, in id order
        (events/log.append_rows). They are handed out here, in memory, only when
        that is provably complete and in order: streams are open (the hub has a
        cursor), no shared read is in progress (it may hold some of these rows
        already), and the ids run on from the cursor without a hole (no other
        commit's row can be before or between them). Otherwise the reader reads
        the log from its cursor, as for `notify`: the log stays the truth, this
        only saves the read-back.

        PostgreSQL: ids come from a sequence drawn under the event lock
        (events/log.take_event_lock), so another replica's commit, or an id a
        rolled-back transaction drew, leaves a hole between the cursor and these
        ids: the rule above falls back to the read then, and the replica's
        NOTIFY wakes the reader anyway."""
        if not events or not self._subs:
            return  # nobody listens; the first stream to open starts from the head
        cursor = self._cursor
        if (
            cursor is not None
            and not self._reading
            and not self._closed
            and all(e.id == cursor + i for i, e in enumerate(events, 1))
        ):
            self._dispatch(events)
            self._cursor = events[-1].id
            self.direct += 1
            return
        self._wake.set()

    def recheck(self, principals: Iterable[str]) -> None:
        """A token or key of these principals was revoked or shortened: their
        streams re-check their own token now (the others keep sleeping)."""
        for p in principals:
            for sub in self._subs.get(p, ()):
                sub.recheck = True
                sub.wake.set()

    # -- the reader task ------------------------------------------------------------

    def attach(
        self, read_after: ReadAfter, read_head: ReadHead, check_tokens: CheckTokens | None = None
    ) -> None:
        self._read_after = read_after
        self._read_head = read_head
        self._check_tokens = check_tokens

    def tick(self) -> None:
        """Raise `recheck` on streams whose token expired, `ping` on those due a
        keep-alive, `closed` on all of them once the gateway drains."""
        wall, mono = utcnow(), time.monotonic()
        for subs in self._subs.values():
            for sub in subs:
                if sub.until is not None and wall >= sub.until:
                    sub.recheck = True
                    sub.wake.set()
                if mono >= sub.next_ping:
                    sub.ping = True
                    sub.next_ping = mono + self.ping_s
                    sub.wake.set()
                if self._draining and not sub.closed:
                    sub.closed = True
                    sub.wake.set()

    def drain(self) -> None:
        """The gateway is shutting down: every stream ends and new ones are
        refused. Safe to call from a signal handler (the streams are woken from
        the event loop, at the latest by the next tick)."""
        self._draining = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.tick)

    async def recheck_tokens(self) -> None:
        """One query for the tokens of all open streams: a stream whose token no
        longer works re-checks it itself (and ends); the others only learn their
        token's current end (another gateway process may have shortened it)."""
        if self._check_tokens is None:
            return
        subs = [sub for subs in self._subs.values() for sub in subs if sub.token is not None]
        if not subs:
            return
        try:
            valid = await self._check_tokens({sub.token for sub in subs if sub.token})
        except Exception:
            log.exception("shared token re-check failed; streams check their own")
            valid = {}
        self.token_checks += 1
        for sub in subs:
            if sub.token in valid:
                sub.until = valid[sub.token]
            else:
                sub.recheck = True
                sub.wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        """Read the log once per wake-up and fan the rows out, until `close()`.
        A read in progress finishes (cancelling an aiosqlite call midway hangs
        its connection's close; see services/scheduler.py)."""
        assert self._read_after is not None, "attach() before run()"
        self._loop = asyncio.get_running_loop()
        next_tick = time.monotonic() + TICK_S
        next_poll = time.monotonic() + self._poll_s
        next_recheck = time.monotonic() + self._recheck_s
        while not self._closed:
            with anyio.move_on_after(max(next_tick - time.monotonic(), 0.0)):
                await self._wake.wait()
            now = time.monotonic()
            if now >= next_tick:
                self.tick()
                next_tick = now + TICK_S
            if now >= next_recheck:
                next_recheck = now + self._recheck_s
                await self.recheck_tokens()
            if now >= next_poll:
                self._wake.set()
            if not self._wake.is_set():
                continue
            next_poll = now + self._poll_s
            self._wake.clear()
            if self._closed:
                return
            if not self._subs:
                self._cursor = None
                continue
            self._reading = True  # a publish meanwhile is read, not handed out twice
            try:
                await self._read_all(self._read_after)
            except Exception:
                log.exception("shared event read failed; streams read the log themselves")
                for subs in self._subs.values():
                    for sub in subs:
                        sub.reread = True
                        sub.wake.set()
            finally:
                self._reading = False

    async def _read_all(self, read_after: ReadAfter) -> None:
        while self._cursor is not None and not self._closed:
            rows = await read_after(self._cursor, self._batch)
            self.shared_reads += 1
            self._dispatch(rows)
            if rows and self._cursor is not None:
                self._cursor = max(self._cursor, rows[-1].id)
            if len(rows) < self._batch:
                return

    def _dispatch(self, rows: Sequence[LiveEvent]) -> None:
        for row in rows:
            for sub in self._subs.get(row.principal, ()):
                if not sub.keep_rows:
                    sub.wake.set()
                    continue
                if sub.reread:
                    continue  # it reads the log itself, this row included
                if len(sub.rows) >= self._max_queue:
                    # A stream whose client does not keep up: drop its queue, it
                    # catches up from the log (memory stays bounded per stream).
                    sub.rows.clear()
                    sub.reread = True
                else:
                    sub.rows.append(row)
                sub.wake.set()
