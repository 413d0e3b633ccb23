"""The hub's bookkeeping (events/hub.py), with a fake log: one read per wake-up
for all streams, rows only to their principal's streams, a bounded queue that
falls back to the stream's own read, and the cursor set from the log head."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import anyio
import pytest

from mailui4agents.events.hub import EventHub, LiveEvent, Subscription

pytestmark = pytest.mark.anyio


class FakeLog:
    def __init__(self) -> None:
        self.rows: list[LiveEvent] = []
        self.reads = 0
        self.read_done = anyio.Event()

    def add(self, principal: str) -> None:
        self.rows.append(LiveEvent.of(len(self.rows) + 1, principal, "t", {}))

    async def after(self, after: int, limit: int) -> list[LiveEvent]:
        self.reads += 1
        self.read_done.set()  # the hub dispatches before the waiting test runs
        self.read_done = anyio.Event()
        return [r for r in self.rows if r.id > after][:limit]

    async def head(self) -> int:
        return len(self.rows)


async def settle(hub: EventHub, reads: int, log: FakeLog) -> None:
    with anyio.fail_after(5):
        while log.reads < reads:
            await log.read_done.wait()


async def test_one_read_per_commit_hands_rows_to_their_principals_streams_only() -> None:
    log = FakeLog()
    log.add("agent:a")  # before any stream: not handed out
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        a1, a2, b = [await hub.subscribe(p) for p in ("agent:a", "agent:a", "agent:b")]
        for s in (a1, a2, b):
            s.reread = False  # as a stream does once it has replayed
        await settle(hub, 1, log)  # the read the first subscribe asked for
        log.add("agent:a")
        log.add("agent:c")
        hub.notify({"agent:a", "agent:c"})
        await settle(hub, 2, log)
        assert [r.id for r in a1.rows] == [r.id for r in a2.rows] == [2]
        assert not b.rows and not b.wake.is_set()
        assert log.reads == 2  # one shared read, whatever the number of streams
        hub.close()


async def test_a_stream_that_falls_behind_drops_its_queue_and_rereads() -> None:
    log = FakeLog()
    hub = EventHub(max_queue=2, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        slow = await hub.subscribe("agent:a")
        slow.reread = False
        for _ in range(5):
            log.add("agent:a")
        hub.notify({"agent:a"})  # coalesced with the subscribe's wake-up: one read
        await settle(hub, 1, log)
        assert slow.reread and not slow.rows  # it reads the log itself, from its cursor
        hub.close()


async def test_with_no_stream_the_hub_reads_nothing_and_restarts_from_the_head() -> None:
    log = FakeLog()
    hub = EventHub()
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        log.add("agent:a")
        hub.notify({"agent:a"})  # nobody listens: no read
        sub = await hub.subscribe("agent:a")
        sub.reread = False
        await settle(hub, 1, log)
        assert not sub.rows  # row 1 predates the stream: its own replay covers it
        hub.unsubscribe(sub)
        assert hub.connected("agent:a") == 0
        hub.close()
    assert log.reads == 1


async def test_a_commit_without_a_wake_up_is_read_by_the_poll() -> None:
    """Another gateway process (replicas on PostgreSQL) commits without notifying
    this hub: its periodic read picks the row up."""
    log = FakeLog()
    hub = EventHub(poll_s=0.05)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        sub = await hub.subscribe("agent:a")
        sub.reread = False
        await settle(hub, 1, log)
        log.add("agent:a")  # no notify
        await settle(hub, 2, log)
        assert [r.id for r in sub.rows] == [1]
        hub.close()


async def test_the_tokens_of_all_open_streams_are_rechecked_in_one_call() -> None:
    """No stream re-checks its own token on a timer (5,000 streams made 333 reads a
    second): the hub asks once for all of them; only a stream whose token failed
    re-checks it itself (and ends), the others learn their token's end."""
    log = FakeLog()
    calls: list[set[str]] = []
    until = datetime(2030, 1, 1, tzinfo=UTC)

    async def check(tokens: set[str]) -> dict[str, datetime | None]:
        calls.append(set(tokens))
        return {t: until for t in tokens if t != "revoked"}

    hub = EventHub()
    hub.attach(log.after, log.head, check)
    subs = [await hub.subscribe("agent:a") for _ in range(3)]
    for sub, token in zip(subs, ("good", "good", "revoked"), strict=True):
        sub.token = token
    await hub.recheck_tokens()
    assert calls == [{"good", "revoked"}] and hub.token_checks == 1
    assert [s.recheck for s in subs] == [False, False, True]
    assert [s.wake.is_set() for s in subs] == [False, False, True]
    assert subs[0].until == subs[1].until == until


async def test_the_clock_raises_keep_alives_and_a_drain_ends_every_stream() -> None:
    log = FakeLog()
    hub = EventHub(ping_s=60)
    hub.attach(log.after, log.head)
    due, later = await hub.subscribe("agent:a"), await hub.subscribe("agent:b")
    due.next_ping, later.next_ping = 0.0, math.inf
    hub.tick()
    assert due.ping and due.wake.is_set() and due.next_ping > 0
    assert not later.ping and not later.wake.is_set()
    hub.drain()
    hub.tick()
    assert due.closed and later.closed and later.wake.is_set()
    with pytest.raises(RuntimeError):
        await hub.subscribe("agent:c")  # a draining gateway opens no new stream


# -- a commit hands its rows to the hub (EventHub.publish) ---------------------------


async def open_stream(hub: EventHub, log: FakeLog, principal: str = "agent:a") -> Subscription:
    """A stream that has replayed the log: it lives on the hub's hand-offs."""
    sub = await hub.subscribe(principal)
    sub.reread = False
    await settle(hub, log.reads + 1, log)  # the read the first subscribe asked for
    return sub


async def test_a_commit_that_follows_the_cursor_is_handed_out_without_a_read() -> None:
    log = FakeLog()
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        a, b = await open_stream(hub, log), await hub.subscribe("agent:b")
        b.reread = False
        reads = hub.shared_reads
        log.add("agent:a")
        log.add("agent:c")
        hub.publish(log.rows[-2:])
        # Handed out in the call itself: no read, no wait for the reader task.
        assert [r.id for r in a.rows] == [1] and a.wake.is_set()
        assert not b.rows and not b.wake.is_set()  # rows go to their principal only
        assert hub.direct == 1 and hub.shared_reads == reads
        log.add("agent:a")
        hub.publish(log.rows[-1:])
        assert [r.id for r in a.rows] == [1, 3] and hub.direct == 2
        hub.close()
    assert hub.shared_reads == reads and log.reads == 1


async def test_a_commit_after_a_hole_is_read_from_the_cursor_not_skipped() -> None:
    """Another writer's row (another gateway process, or a write that published
    nothing) lies between the cursor and the commit: the hub reads the log."""
    log = FakeLog()
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        sub = await open_stream(hub, log)
        log.add("agent:a")  # committed elsewhere: never published here
        log.add("agent:a")
        hub.publish(log.rows[-1:])
        assert not sub.rows and hub.direct == 0  # not handed out: id 1 comes first
        await settle(hub, 2, log)
        assert [r.id for r in sub.rows] == [1, 2]
        hub.close()


async def test_ids_that_do_not_run_on_one_by_one_are_read() -> None:
    """A commit whose ids have a hole of their own (PostgreSQL: a sequence value
    a rolled-back transaction drew) is read, whatever its first id."""
    log = FakeLog()
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        sub = await open_stream(hub, log)
        one = LiveEvent.of(1, "agent:a", "t", {})
        three = LiveEvent.of(3, "agent:a", "t", {})
        log.rows += [one, three]
        hub.publish([one, three])
        assert not sub.rows and hub.direct == 0
        await settle(hub, 2, log)
        assert [r.id for r in sub.rows] == [1, 3]
        hub.close()


class GatedLog(FakeLog):
    """A log whose next read waits at a gate, so a test can publish while the
    hub's read is in flight; the read returns the rows as of the gate's opening."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()

    async def after(self, after: int, limit: int) -> list[LiveEvent]:
        if self.gate is not None:
            gate, self.gate = self.gate, None
            self.entered.set()
            await gate.wait()
        return await super().after(after, limit)


async def test_a_commit_published_while_a_read_is_in_flight_is_handed_out_once() -> None:
    log = GatedLog()
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        sub = await open_stream(hub, log)
        gate = log.gate = anyio.Event()
        hub.notify({"agent:a"})  # the poll, or another replica's commit: a read starts
        with anyio.fail_after(5):
            await log.entered.wait()
        log.add("agent:a")  # committed while the read is in flight: it will see it
        hub.publish(log.rows[-1:])  # follows the cursor, but the read may hold it
        assert not sub.rows and hub.direct == 0
        gate.set()
        await settle(hub, 3, log)  # the read in flight, then the one the publish asked for
        assert [r.id for r in sub.rows] == [1]
        hub.close()


@pytest.mark.parametrize("read_between", [False, True])
async def test_commits_published_out_of_order_lose_nothing_and_repeat_nothing(
    read_between: bool,
) -> None:
    """A commits id 1, B commits id 2, and B's publish reaches the hub first
    (two transactions ending in one turn of the event loop)."""
    log = FakeLog()
    hub = EventHub(max_queue=10, batch=100)
    hub.attach(log.after, log.head)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        sub = await open_stream(hub, log)
        log.add("agent:a")
        log.add("agent:a")
        a, b = log.rows
        hub.publish([b])  # a hole: the reader is woken
        if read_between:
            await settle(hub, 2, log)  # it reads 1 and 2
            hub.publish([a])  # behind the cursor now: read again (nothing new)
            await settle(hub, 3, log)
        else:
            hub.publish([a])  # before the reader runs: handed out, the read gets 2
            await settle(hub, 2, log)
        assert [r.id for r in sub.rows] == [1, 2]
        hub.close()
