"""events/pg_listen.py: a replica's listener wakes its hub for the commits of
other processes (replicas, the CLI) and skips its own, whose events reached the
hub in-process (state.Gateway.write): each of them cost a read of the log that
found nothing new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from mailui4agents.app import start_gateway
from mailui4agents.events import log, pg_listen
from mailui4agents.events.hub import EventHub
from mailui4agents.wire.events import EventType
from tests.conftest import fast_settings

pytestmark = pytest.mark.anyio


def test_the_listener_wakes_the_hub_for_other_processes_only() -> None:
    hub = EventHub()
    woke: list[object] = []
    hub.notify = woke.append  # type: ignore[method-assign,assignment]
    on = pg_listen.woken(hub)
    on(None, 1, log.PG_CHANNEL, hub.replica)
    assert woke == []  # its own commit
    on(None, 1, log.PG_CHANNEL, "")  # the CLI's (no hub, no name)
    on(None, 1, log.PG_CHANNEL, EventHub().replica)  # another replica's
    assert len(woke) == 2
    assert hub.replica != EventHub().replica  # drawn per gateway, not per module


class Count:
    """A count that a test can wait on (events, not polls)."""

    def __init__(self) -> None:
        self.n = 0
        self._changed = anyio.Event()

    def add(self) -> None:
        self.n += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def reach(self, n: int) -> None:
        with anyio.fail_after(10):
            while self.n < n:
                await self._changed.wait()


@pytest.mark.e2e  # a PostgreSQL server
async def test_a_replicas_own_commit_wakes_no_read_on_postgresql(
    pg_database: str, tmp_path: Path
) -> None:
    """The commit's NOTIFY carries the gateway's name, and its listener lets it
    pass; another process's NOTIFY, sent after it, wakes the hub. PostgreSQL
    delivers a channel's notifications in commit order, so once the second has
    woken the hub the first was already skipped."""
    gw, _ = await start_gateway(fast_settings(tmp_path, database_url=pg_database))
    listened = Count()  # wake-ups from the listener: hub.notify(())
    real_notify = gw.hub.notify

    def notify(principals: Any) -> None:
        if principals == ():
            listened.add()
        real_notify(principals)

    gw.hub.notify = notify  # type: ignore[method-assign]
    seen: list[str] = []
    heard = Count()

    def hear(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        seen.append(payload)
        heard.add()

    other: Any = await asyncpg.connect(pg_listen.asyncpg_dsn(gw.db.url))
    stop = anyio.Event()
    try:
        await other.add_listener(log.PG_CHANNEL, hear)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pg_listen.listen, gw.db.url, gw.hub, stop)
            await listened.reach(1)  # the wake-up it gives once connected
            async with gw.write() as s:
                await log.append(s, ["agent:claude"], EventType.NEW_MAIL, {"mail_id": "m"})
            await other.execute("SELECT pg_notify($1, 'another-process')", log.PG_CHANNEL)
            await heard.reach(2)
            await listened.reach(2)
            stop.set()
        assert seen == [gw.hub.replica, "another-process"]
        assert listened.n == 2  # connected, another process; never its own
    finally:
        await other.close()
        await gw.db.dispose()
