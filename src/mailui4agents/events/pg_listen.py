"""Replicas on PostgreSQL: wake this gateway's hub when any replica commits events.

Every write that appends events calls `pg_notify` in its transaction
(events/log.take_event_lock), so the notification arrives when, and only if,
it commits. One dedicated asyncpg connection per gateway LISTENs and wakes the
hub, whose one shared read then fetches the new rows from the log. The database
stays the one truth: a notification lost while the connection was down costs
latency only — the hub re-reads on reconnect and every `poll_s` anyway
(events/hub.py). See docs/postgres.md.

A notification whose payload is this gateway's own name (`EventHub.replica`)
wakes nothing: every commit of this gateway hands its events to the hub
in-process (state.Gateway.write), and the read its NOTIFY used to cause came
back empty of anything new, once per commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from sqlalchemy.engine import make_url

from mailui4agents.events.hub import EventHub
from mailui4agents.events.log import PG_CHANNEL

log = logging.getLogger("mailui4agents.events")

RETRY_S = 1.0  # after a lost connection; the hub's periodic re-read covers the gap


def asyncpg_dsn(sqlalchemy_url: str) -> str:
    """postgresql+asyncpg://… as the plain postgresql://… asyncpg connects to."""
    url = make_url(sqlalchemy_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


async def listen(url: str, hub: EventHub, stop: anyio.Event) -> None:
    """LISTEN until `stop` is set, reconnecting after any failure."""
    dsn = asyncpg_dsn(url)
    while not stop.is_set():
        try:
            await _listen_once(dsn, hub, stop)
        except Exception:
            log.warning("LISTEN connection failed; retrying in %.0f s", RETRY_S, exc_info=True)
        if not stop.is_set():
            with anyio.move_on_after(RETRY_S):
                await stop.wait()


def woken(hub: EventHub) -> Callable[[Any, int, str, str], None]:
    """The listener: wakes the hub for another process's commit, not its own."""

    def on_notification(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload != hub.replica:
            hub.notify(())

    return on_notification


async def _listen_once(dsn: str, hub: EventHub, stop: anyio.Event) -> None:
    """One connection: returns when `stop` is set or the connection is lost."""
    import asyncpg

    conn: Any = await asyncpg.connect(dsn)
    lost = anyio.Event()
    try:
        conn.add_termination_listener(lambda *_a: lost.set())
        await conn.add_listener(PG_CHANNEL, woken(hub))
        hub.notify(())  # whatever committed while we were not listening
        async with anyio.create_task_group() as tg:

            async def until_lost() -> None:
                await lost.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until_lost)
            await stop.wait()
            tg.cancel_scope.cancel()
    finally:
        if not conn.is_closed():
            with anyio.move_on_after(5, shield=True):
                await conn.close()
