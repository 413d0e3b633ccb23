"""A commit hands the rows it appended to the hub (events/log.append_rows keeps
them, state.Gateway.write publishes them, events/hub.EventHub.publish hands them
out): the frames are byte for byte those a read of the log makes, nothing is
handed out of a savepoint that may be rolled back, another writer's rows are
read rather than skipped, and under concurrent commits every row reaches its
stream exactly once; over HTTP, a stream gets live the bytes a replay reads. On
SQLite and on PostgreSQL (the `settings` fixture).
The hub's own rules, with a fake log: tests/services/test_hub.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.engine import Database
from mailui4agents.events import log
from mailui4agents.events.hub import LiveEvent, Subscription, sse_frame
from mailui4agents.http import event_stream
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from mailui4agents.wire.models import ResetEvent
from tests.conftest import ADMIN_PASSWORD, Api
from tests.live_app import live_app_here

pytestmark = pytest.mark.anyio


SHARED = {"to": ["ana", "bob"], "n": 1}
EVENTS: list[log.Event] = [
    (
        "agent:claude",
        "new_mail",
        {"subject": "Grüße ✓ 日本語 🙂", "body": 'a "q" \\ b\r\nc\u2028d'},
    ),
    ("user:ana", "new_mail", SHARED),  # one payload, two rows: encoded once
    ("user:bob", "new_mail", SHARED),
    (
        "user:ana",
        "permission_request",
        {
            "tool_input": {"cmd": "ls ö", "args": [1, 2.5, -0.0, 1e300, None, True, {"k": []}]},
            "options": None,
            "empty": {},
            "big": 2**62,
        },
    ),
    ("agent:claude", "session_update", None),  # null data
    ("user:ana", "reset", ResetEvent(reason="ahead_of_log", last_event_id=9, head=3, message="é")),
]


async def test_the_published_frames_are_byte_for_byte_the_frames_read_back(gw: Gateway) -> None:
    await gw.hub.subscribe("agent:claude")  # a stream is open: the rows are kept
    async with gw.write() as s:
        before = await log.last_id(s)
        await log.append_rows(s, EVENTS[:2])
        await log.append_rows(s, EVENTS[2:])  # a second append: ids run on
        published = log.live_events(s.info[log.PUBLISHED])
    assert [e.id for e in published] == list(range(before + 1, before + 1 + len(EVENTS)))
    assert [e.principal for e in published] == [p for p, _, _ in EVENTS]
    async with gw.read() as s:
        shared_read = await log.after_all(s, before, 100)  # the hub's read
        replays = {p: await log.since(s, p, before, 100) for p, _, _ in EVENTS}
    assert published == shared_read
    # A stream's own replay (http/event_stream.py) encodes the rows it reads.
    for p, rows in replays.items():
        mine = [e.frame for e in published if e.principal == p]
        assert [sse_frame(r.id, r.type, r.data) for r in rows] == mine
    assert b"data: null\r\n" in published[4].frame
    assert "Grüße ✓ 日本語 🙂".encode() in published[0].frame  # as UTF-8, not \u escapes


async def test_a_payload_changed_after_its_append_is_handed_out_as_written(gw: Gateway) -> None:
    await gw.hub.subscribe("agent:a")
    data = {"n": 1}
    async with gw.write() as s:
        before = await log.last_id(s)
        await log.append_rows(s, [("agent:a", "t", data)])
        data["n"] = 2  # the caller's dict, changed before the commit
        kept = s.info[log.PUBLISHED]
    async with gw.read() as s:
        stored = await log.after_all(s, before, 10)
    assert log.live_events(kept) == stored and b'"n": 1' in stored[0].frame


class Spy:
    """What the gateway hands its hub after each commit."""

    def __init__(self, gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
        self.published: list[list[LiveEvent]] = []
        self.notified = 0
        monkeypatch.setattr(gw.hub, "publish", lambda events: self.published.append(events))
        monkeypatch.setattr(gw.hub, "notify", lambda _p: self._notified())

    def _notified(self) -> None:
        self.notified += 1


async def test_rows_appended_in_a_savepoint_are_read_not_handed_out(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A savepoint rolled back takes its rows with it (and SQLite hands their ids
    out again): a transaction that appended in one is left to the hub's read."""
    spy = Spy(gw, monkeypatch)
    await gw.hub.subscribe("agent:a")  # a stream is open: commits are published
    async with gw.write() as s:
        await log.append_rows(s, [("agent:a", "t", {"kept": True})])
        with pytest.raises(RuntimeError):
            async with s.begin_nested():
                await log.append_rows(s, [("agent:a", "t", {"gone": True})])
                raise RuntimeError("refused after the append")
    assert spy.published == [] and spy.notified == 1
    async with gw.write() as s:  # the next transaction publishes again
        await log.append_rows(s, [("agent:a", "t", {})])
    assert len(spy.published) == 1 and spy.notified == 1


class Reads:
    """The hub's shared reads, each one set on an event a test can wait for."""

    def __init__(self, gw: Gateway) -> None:
        self.done = 0
        self.changed = anyio.Event()

        async def read_after(after: int, limit: int) -> list[LiveEvent]:
            async with gw.read() as s:
                rows = await log.after_all(s, after, limit)
            self.done += 1
            self.changed.set()
            self.changed = anyio.Event()
            return rows

        async def read_head() -> int:
            async with gw.read() as s:
                return await log.last_id(s)

        gw.hub.attach(read_after, read_head)

    async def wait(self, done: int) -> None:
        with anyio.fail_after(10):
            while self.done < done:
                await self.changed.wait()


async def stream(gw: Gateway, reads: Reads, principal: str) -> Subscription:
    """A stream that starts at the hub's cursor, once the hub's first read is done."""
    sub = await gw.hub.subscribe(principal, reread=False)
    await reads.wait(1)  # the read the first subscribe asks for
    return sub


async def drain(sub: Subscription, until: Callable[[list[int]], bool]) -> list[int]:
    got: list[int] = []
    with anyio.fail_after(10):
        while True:
            got += [e.id for e in sub.rows]
            sub.rows.clear()
            assert not sub.reread, "the hub gave up on this stream"
            if until(got):
                return got
            sub.wake.clear()
            await sub.wake.wait()


async def test_a_commit_reaches_an_open_stream_without_a_read(gw: Gateway) -> None:
    reads = Reads(gw)
    async with anyio.create_task_group() as tg:
        tg.start_soon(gw.hub.run)
        sub = await stream(gw, reads, "agent:a")
        direct = gw.hub.direct
        async with gw.write() as s:
            await log.append_rows(s, [("agent:a", "t", {"n": 1}), ("agent:b", "t", {})])
            ids = [e.id for e in log.live_events(s.info[log.PUBLISHED])]
        # Handed out as the write returned: no read, no turn of the event loop.
        assert [e.id for e in sub.rows] == ids[:1]
        assert gw.hub.direct == direct + 1 and reads.done == 1
        gw.hub.close()


async def test_a_commit_whose_caller_is_cancelled_still_reaches_the_stream(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write cancelled while its COMMIT is answered (on PostgreSQL, a task
    cancelled at that moment): the commit went through, the code after it never ran.
    The hub reads the log at once, rather than at its next poll (15 s) or the
    next commit's read: on PostgreSQL its own NOTIFY does not wake it."""
    reads = Reads(gw)
    real = gw.db.write

    @asynccontextmanager
    async def commits_then_cancelled(*, inline: bool = False) -> AsyncIterator[AsyncSession]:
        async with real(inline=inline) as s:
            yield s
        raise asyncio.CancelledError  # after the commit, before the caller's next line

    async with anyio.create_task_group() as tg:
        tg.start_soon(gw.hub.run)
        sub = await stream(gw, reads, "agent:a")
        monkeypatch.setattr(gw.db, "write", commits_then_cancelled)
        with pytest.raises(asyncio.CancelledError):
            async with gw.write() as s:
                await log.append_rows(s, [("agent:a", "t", {"n": 1})])
                ids = [e.id for e in log.live_events(s.info[log.PUBLISHED])]
        monkeypatch.undo()
        assert await drain(sub, lambda got: bool(got)) == ids  # drain: 10 s at most
        gw.hub.close()

    # A cancelled block that appended nothing asks the hub for nothing.
    calls: list[object] = []
    monkeypatch.setattr(gw.hub, "notify", calls.append)
    monkeypatch.setattr(gw.db, "write", commits_then_cancelled)
    with pytest.raises(asyncio.CancelledError):
        async with gw.write():
            pass
    assert calls == []


async def test_another_writers_rows_are_read_not_skipped(gw: Gateway) -> None:
    """A second engine on the same database (another gateway process: a replica
    on PostgreSQL, a CLI on SQLite) appends a row this hub was never handed; the
    next commit here does not follow the cursor, so the hub reads the log."""
    reads = Reads(gw)
    other = Database(gw.db.url)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(gw.hub.run)
            sub = await stream(gw, reads, "agent:a")
            async with other.write() as s:
                await log.append_rows(s, [("agent:a", "t", {"from": "elsewhere"})])
            async with gw.write() as s:
                await log.append_rows(s, [("agent:a", "t", {"from": "here"})])
                mine = log.live_events(s.info[log.PUBLISHED])[0].id
            assert not sub.rows  # not handed out: the other row comes first
            got = await drain(sub, lambda got: mine in got)
            assert got == [mine - 1, mine]
            assert reads.done >= 2
            gw.hub.close()
    finally:
        await other.dispose()


async def test_concurrent_commits_reach_a_stream_each_exactly_once(gw: Gateway) -> None:
    """Many writers at once, a third of them another gateway's (PostgreSQL: real
    concurrent transactions, ids drawn under the event lock; SQLite: one writer
    per engine, commits queued): the hub hands out some commits and reads the
    others, publishes arrive while reads are in flight; the stream gets every
    row once, in id order."""
    reads = Reads(gw)
    writers, rows_each = 24, 3
    ids: list[int] = []
    other = Database(gw.db.url)

    async def write(n: int) -> None:
        rows: list[log.Event] = [("agent:a", "t", {"w": n, "i": i}) for i in range(rows_each)]
        async with gw.write() if n % 3 else other.write() as s:
            s.info[log.LISTENING] = True  # the other gateway has streams open too
            await log.append_rows(s, rows)
            ids.extend(e.id for e in log.live_events(s.info[log.PUBLISHED]))
        if not n % 3:
            gw.hub.notify(())  # as the other gateway's NOTIFY would (events/pg_listen.py)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(gw.hub.run)
            sub = await stream(gw, reads, "agent:a")
            async with anyio.create_task_group() as senders:
                for n in range(writers):
                    senders.start_soon(write, n)
            got = await drain(sub, lambda got: len(got) >= writers * rows_each)
            assert got == sorted(ids) and len(set(got)) == len(got) == writers * rows_each
            gw.hub.close()
    finally:
        await other.dispose()


# -- over HTTP: a frame handed out live equals the frame a replay reads -------------


class RawStream:
    """One SSE stream over real HTTP, its event frames kept as the bytes sent."""

    def __init__(self) -> None:
        self.start: int | None = None  # the id of its `: connected` line
        self.frames: list[bytes] = []
        self.changed = anyio.Event()

    def ids(self) -> list[int]:
        return [int(f.split(b"\r\n", 1)[0].removeprefix(b"id: ")) for f in self.frames]

    async def wait_for(self, ids: list[int]) -> None:
        with anyio.fail_after(10):
            while self.ids()[: len(ids)] != ids:
                assert len(self.frames) < len(ids), (self.ids(), ids)
                await self.changed.wait()


@asynccontextmanager
async def raw_stream(
    url: str, path: str, token: str, last_event_id: int | None = None
) -> AsyncIterator[RawStream]:
    """Yields once the stream is open (its `: connected` line received)."""
    out = RawStream()
    opened = anyio.Event()
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)

    async def read() -> None:
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as http,
            http.stream("GET", path, headers=headers) as r,
        ):
            assert r.status_code == 200
            buffer = b""
            async for chunk in r.aiter_raw():
                buffer += chunk
                *blocks, buffer = buffer.split(b"\r\n\r\n")
                for block in blocks:
                    if block.startswith(b": connected\r\nid: "):
                        out.start = int(block.rsplit(b" ", 1)[1])
                        opened.set()
                    elif block.startswith(b"id: "):
                        out.frames.append(block + b"\r\n\r\n")
                out.changed.set()
                out.changed = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        with anyio.fail_after(10):
            await opened.wait()
        yield out
        tg.cancel_scope.cancel()


async def test_a_stream_gets_live_the_bytes_a_replay_reads_from_the_log(
    settings: Settings,
) -> None:
    """One stream of each principal is open while a mail, a permission request
    (nested, non-ASCII input) and its decision are committed: they get their
    frames as the commits hand them to the hub. A second stream of each then
    replays the same ids from the log with Last-Event-ID: the bytes are equal."""
    quiet = settings.model_copy(update={"sse_ping_s": 3600})  # no keep-alive, no poll
    async with live_app_here(quiet) as live, httpx.AsyncClient(base_url=live.url) as http:
        gw = live.gateway
        reads = Reads(gw)
        api = Api(http)
        await api.login("admin", ADMIN_PASSWORD)
        claude = await api.agent("claude")
        ana = await api.user("ana")
        async with (
            raw_stream(live.url, "/api/v1/agent/events", claude) as agent_live,
            raw_stream(live.url, "/api/v1/events", ana) as human_live,
        ):
            await reads.wait(1)  # the read the first stream asked for: the hub is idle
            direct = gw.hub.direct
            body = 'Grüße ✓ 日本語 🙂 "q" \\ line\r\nnext'
            sent = await api.send("ana", ["claude@/srv/shop.new"], subject="Grüße 🙂", body=body)
            assert sent.status_code == 201, sent.text
            asked = await http.post(
                "/api/v1/agent/permissions",
                json={
                    "session_id": sent.json()["session_id"],
                    "kind": "approval",
                    "tool_name": "Bash",
                    "tool_input": {"command": "rm -rf ./ö", "env": {"A": [1, 2.5, None]}},
                    "relay_key": "k1",
                },
                headers=api.auth("claude"),
            )
            assert asked.status_code == 201, asked.text
            decided = await http.post(
                f"/api/v1/permissions/{asked.json()['id']}/decision",
                json={"decision": "approve", "note": "ok ✓"},
                headers=api.auth("ana"),
            )
            assert decided.status_code == 200, decided.text
            if gw.db.dialect != "postgresql":
                # Every commit handed out as written (on PostgreSQL the gateway's
                # own NOTIFY wakes reads too, so some are read instead).
                assert gw.hub.direct == direct + 3 and reads.done == 1
            for live_stream, principal in ((agent_live, "agent:claude"), (human_live, "user:ana")):
                async with gw.read() as s:
                    rows = await log.since(s, principal, live_stream.start or 0, 100)
                ids = [r.id for r in rows]
                assert len(ids) >= 2, ids  # the mail or request, and the decision
                await live_stream.wait_for(ids)
        for token, path, seen in (
            (claude, "/api/v1/agent/events", agent_live),
            (ana, "/api/v1/events", human_live),
        ):
            async with raw_stream(live.url, path, token, last_event_id=seen.start) as replay:
                await replay.wait_for(seen.ids())
                assert replay.frames == seen.frames
        assert "Grüße 🙂".encode() in b"".join(agent_live.frames)


async def test_with_no_stream_open_nothing_is_built_for_the_hub(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no stream open a commit keeps nothing for the hub: no RETURNING, no
    frames; with one open, the frames are built after the commit."""
    spy = Spy(gw, monkeypatch)
    built: list[int] = []
    live_events = log.live_events

    def counted(published: list[log.Appended]) -> list[LiveEvent]:
        built.append(len(published))
        return live_events(published)

    monkeypatch.setattr(log, "live_events", counted)
    async with gw.write() as s:
        await log.append_rows(s, [("agent:a", "t", {})])
        assert s.info[log.PUBLISHED] is None
    assert built == [] and spy.published == [] and spy.notified == 1
    sub = await gw.hub.subscribe("agent:a")
    async with gw.write() as s:
        await log.append_rows(s, [("agent:a", "t", {})])
    assert built == [1] and len(spy.published) == 1 and spy.notified == 1
    gw.hub.unsubscribe(sub)


async def test_a_fresh_stream_gets_a_commit_made_before_it_read_the_head(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client may post as soon as its stream's headers arrive (tests/sse.collect
    does), before the stream has read the log's head: that commit must reach the
    stream. It starts where the hub began handing it rows, not at a head read
    after the commit (which skipped it, and once failed a CI run:
    tests/e2e/test_scenario.py, every open stream of one agent)."""
    quiet = settings.model_copy(update={"sse_ping_s": 3600})
    reached, go = anyio.Event(), anyio.Event()
    real = event_stream.EventStream._head_and_until

    async def held(self: event_stream.EventStream, sub: Subscription) -> tuple[int, int]:
        reached.set()  # subscribed; the head is not read yet
        await go.wait()
        return await real(self, sub)

    async with live_app_here(quiet) as live, httpx.AsyncClient(base_url=live.url) as http:
        api = Api(http)
        await api.login("admin", ADMIN_PASSWORD)
        claude = await api.agent("claude")
        await api.user("ana")
        async with raw_stream(live.url, "/api/v1/agent/events", claude) as first:
            monkeypatch.setattr(event_stream.EventStream, "_head_and_until", held)
            ids: list[int] = []
            seen: list[int] = []

            async def open_second() -> None:
                async with raw_stream(live.url, "/api/v1/agent/events", claude) as second:
                    await second.wait_for(ids)
                    seen.extend(second.ids())

            async with anyio.create_task_group() as tg:
                tg.start_soon(open_second)
                with anyio.fail_after(10):
                    await reached.wait()
                sent = await api.send("ana", ["claude@/srv/shop.new"], subject="race")
                assert sent.status_code == 201, sent.text
                async with live.gateway.read() as s:
                    ids.extend(
                        r.id for r in await log.since(s, "agent:claude", first.start or 0, 10)
                    )
                assert ids, "the send appended an event for claude"
                await first.wait_for(ids)
                go.set()  # now the second stream reads the head, which holds the commit
            assert seen == ids
