"""Open streams cost (almost) nothing per commit: a commit hands its rows to the
hub, which hands them to all open streams without reading the log (or reads it
once for all of them), and no stream re-checks its token per event
(events/hub.py, http/event_stream.py). Counted with SQLAlchemy statement events on a
real gateway (uvicorn in a thread), not timed."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import event

from mailui4agents.client.sse import SSEParser
from mailui4agents.events.hub import EventHub, Subscription
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, fast_settings
from tests.live_app import LiveApp, live_app

pytestmark = pytest.mark.anyio


class Counter:
    """Counts the statements the gateway's reader engine runs, by kind."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log_reads = 0
        self.token_checks = 0
        self.direct = 0  # commits the hub handed out without reading them back

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        text = " ".join(statement.split()).lower()
        with self.lock:
            if " from events" in text:
                self.log_reads += 1
            if " join agent_keys" in text:  # the streams' key (the sender is a user)
                self.token_checks += 1

    def reset(self) -> None:
        with self.lock:
            self.log_reads = self.token_checks = 0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[LiveApp]:
    # No periodic read of the hub (poll_s is sse_ping_s) during the counted sends.
    with live_app(fast_settings(tmp_path, sse_ping_s=3600)) as live:
        yield live


class Stream:
    """One open SSE stream, collecting `new_mail` events."""

    def __init__(self) -> None:
        self.subjects: list[str] = []
        self.changed = anyio.Event()

    async def wait_for(self, n: int) -> None:
        while len(self.subjects) < n:
            await self.changed.wait()


@asynccontextmanager
async def streams(url: str, key: str, k: int) -> AsyncIterator[list[Stream]]:
    """`k` streams of the same key, each open (200 received) when this yields."""
    opened = [anyio.Event() for _ in range(k)]
    out = [Stream() for _ in range(k)]

    async def read(i: int) -> None:
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as http,
            http.stream("GET", "/api/v1/agent/events", headers=headers) as r,
        ):
            assert r.status_code == 200
            opened[i].set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event == "new_mail":
                        out[i].subjects.append(json.loads(ev.data)["subject"])
                        out[i].changed.set()
                        out[i].changed = anyio.Event()

    async with anyio.create_task_group() as tg:
        for i in range(k):
            tg.start_soon(read, i)
        with anyio.fail_after(30):
            for ev in opened:
                await ev.wait()
        yield out
        tg.cancel_scope.cancel()


async def measure(served: LiveApp, k: int, commits: int) -> Counter:
    counter = Counter()
    engine = served.gateway.db.reader.sync_engine
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        api = Api(http)
        await api.login("admin", ADMIN_PASSWORD)
        if k == 1:
            await api.user("ana")
        else:
            await api.login("ana", USER_PASSWORD)
        name = f"claude{k}"
        key = await api.agent(name)
        async with streams(served.url, key, k) as open_streams:
            # A first mail every stream receives: from here on, each stream has
            # done its one replay of the log and lives on the hub's hand-offs.
            r = await api.send("ana", [f"{name}@/srv/shop.new"], subject="warm-up")
            assert r.status_code == 201, r.text
            with anyio.fail_after(30):
                for s in open_streams:
                    await s.wait_for(1)
            event.listen(engine, "before_cursor_execute", counter)
            direct = served.gateway.hub.direct
            try:
                for i in range(commits):
                    r = await api.send("ana", [f"{name}@/srv/shop"], subject=f"m{i}")
                    assert r.status_code == 201, r.text
                    with anyio.fail_after(30):
                        for s in open_streams:
                            await s.wait_for(i + 2)
            finally:
                event.remove(engine, "before_cursor_execute", counter)
            counter.direct = served.gateway.hub.direct - direct
            for s in open_streams:
                assert s.subjects == ["warm-up", *(f"m{i}" for i in range(commits))]
    return counter


async def test_log_reads_per_commit_do_not_grow_with_the_number_of_open_streams(
    served: LiveApp,
) -> None:
    commits = 5
    one = await measure(served, 1, commits)
    many = await measure(served, 12, commits)
    # No read of the log, whether one stream is open or twelve: each commit hands
    # its rows to the hub (events/hub.py, `publish`), which would otherwise read
    # once per commit for all streams; no token re-check per event. At most one
    # read and one commit read instead of handed out: a read the warm-up asked
    # for may, on a loaded machine, still be in flight at the first counted commit
    # (the exact rule: tests/services/test_event_publish.py, test_hub.py).
    assert one.direct >= commits - 1 and many.direct >= commits - 1, (one.direct, many.direct)
    assert one.log_reads <= 1 and many.log_reads <= 1, (one.log_reads, many.log_reads)
    assert one.token_checks == many.token_checks == 0


def on_unsubscribe(hub: EventHub, principal: str) -> threading.Event:
    """Set when a stream of `principal` leaves the hub (on the gateway's thread)."""
    left = threading.Event()
    original = hub.unsubscribe

    def unsubscribe(sub: Subscription) -> None:
        original(sub)
        if sub.principal == principal:
            left.set()

    hub.unsubscribe = unsubscribe  # type: ignore[method-assign]
    return left


async def test_a_held_stream_gets_keep_alives_and_leaves_the_hub_with_its_client(
    tmp_path: Path,
) -> None:
    """The keep-alive comes from the hub's clock and the disconnect from the
    stream's one helper task (http/event_stream.py): no timer or task of sse-starlette."""
    with live_app(fast_settings(tmp_path, sse_ping_s=1)) as served:
        hub = served.gateway.hub
        left = on_unsubscribe(hub, "agent:pinged")
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            key = await api.agent("pinged")
            headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
            async with (
                httpx.AsyncClient(base_url=served.url, timeout=None) as client,
                client.stream("GET", "/api/v1/agent/events", headers=headers) as r,
            ):
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                seen = b""
                with anyio.fail_after(10):
                    async for chunk in r.aiter_raw():
                        seen += chunk
                        if b": ping\r\n\r\n" in seen:
                            break
                assert seen.startswith(b": connected\r\nid: ")
                assert hub.connected("agent:pinged") == 1
        assert await anyio.to_thread.run_sync(left.wait, 10)
        assert hub.connected("agent:pinged") == 0


async def test_a_key_revoked_behind_the_gateways_back_ends_its_stream_on_the_shared_recheck(
    tmp_path: Path,
) -> None:
    """As another gateway process would (no in-process recheck): the hub's one
    re-check of all open streams' tokens (identity.tokens_until) ends the stream
    of the revoked key and keeps the other agent's."""
    settings = fast_settings(tmp_path, sse_token_recheck_s=0.5)
    with live_app(settings) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            revoked, kept = await api.agent("gone"), await api.agent("stays")
            async with streams(served.url, revoked, 1), streams(served.url, kept, 1):
                hub = served.gateway.hub
                before = hub.token_checks
                left = on_unsubscribe(hub, "agent:gone")
                db = sqlite3.connect(settings.data_dir / "agentmail.db")
                with db:
                    db.execute(
                        "UPDATE agent_keys SET revoked_at = '2026-01-01 00:00:00.000000'"
                        " WHERE agent_id = (SELECT id FROM agents WHERE name = 'gone')"
                    )
                db.close()
                assert await anyio.to_thread.run_sync(left.wait, 15)
                assert hub.token_checks > before
                assert hub.connected("agent:stays") == 1
