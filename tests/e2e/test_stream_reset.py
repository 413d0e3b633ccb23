"""A Last-Event-ID ahead of the log (a gateway restored from a backup) is told
to the client as a `reset` event instead of a stream that silently delivers
nothing; the Python client moves its cursor back and surfaces the reset."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.client import AsyncClient, ClientConfig
from mailui4agents.http.event_stream import AHEAD_OF_LOG, WINDOW_EXCEEDED
from mailui4agents.testing import GatewayProcess
from tests.conftest import Api
from tests.sse import Got, collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AHEAD = 10**6  # far beyond any id this test's log reaches


async def head_after_one_mail(live: Api) -> tuple[str, int]:
    """claude gets one mail; returns its key and the newest id of claude's events."""
    key = await live.agent("claude")
    await live.user("ana")
    assert (await live.send("ana", ["claude@/srv/a"], subject="before")).status_code == 201
    got = await collect(
        live.http, "/api/v1/agent/events", key, last_event_id=0, until=lambda g: len(g) >= 1
    )
    return key, got[-1].id


def new_mails(got: list[Got]) -> list[str]:
    return [g.data["subject"] for g in got if g.type == "new_mail"]


async def client_until_new_mail(
    gateway_process: GatewayProcess, live: Api, key: str, resume: int, subject: str
) -> tuple[list[tuple[str, int | None, dict[str, Any]]], list[str]]:
    """The Python client's events from `resume` until the `new_mail` of a mail ana
    sends (`subject`) once the stream is open; then the subjects of the unread inbox."""
    connected = anyio.Event()
    seen: list[tuple[str, int | None, dict[str, Any]]] = []
    config = ClientConfig(url=gateway_process.url, key=key)
    async with AsyncClient(config, reconnect_initial=0.05, reconnect_cap=0.5) as client:
        stream = client.events(resume, on_connect=connected.set)
        async with aclosing(stream):
            with anyio.fail_after(30):

                async def reader() -> None:
                    async for event in stream:
                        seen.append((event.type, event.id, event.data))
                        if event.type == "new_mail":
                            return

                async with anyio.create_task_group() as tg:
                    tg.start_soon(reader)
                    await connected.wait()
                    r = await live.send("ana", ["claude@/srv/a"], subject=subject)
                    assert r.status_code == 201
        inbox = await client.inbox(status="unread", limit=50)
    return seen, [item.subject for item in inbox.items]


async def test_a_cursor_ahead_of_the_log_gets_a_reset_event_then_new_events(live: Api) -> None:
    key, newest = await head_after_one_mail(live)

    async def send_after() -> None:
        assert (await live.send("ana", ["claude@/srv/a"], subject="after")).status_code == 201

    got = await collect(
        live.http,
        "/api/v1/agent/events",
        key,
        last_event_id=AHEAD,
        on_open=send_after,
        until=lambda g: "after" in new_mails(g),
    )
    reset = got[0]
    assert reset.type == "reset"
    head = reset.data["head"]
    assert reset.data == {
        "reason": "ahead_of_log", "last_event_id": AHEAD, "head": head, "message": AHEAD_OF_LOG
    }  # fmt: skip
    assert reset.id == head >= newest  # the fresh id: the log's head when the stream opened
    assert new_mails(got) == ["after"]  # nothing before the head is replayed
    assert all(g.id > head for g in got[1:])


async def test_a_cursor_at_the_head_gets_no_reset(live: Api) -> None:
    key, newest = await head_after_one_mail(live)

    async def send_after() -> None:
        assert (await live.send("ana", ["claude@/srv/a"], subject="after")).status_code == 201

    got = await collect(
        live.http,
        "/api/v1/agent/events",
        key,
        last_event_id=newest,
        on_open=send_after,
        until=lambda g: "after" in new_mails(g),
    )
    assert [g.type for g in got] == ["new_mail"]


async def test_the_client_surfaces_a_reset_and_then_delivers_lower_ids(
    gateway_process: GatewayProcess, live: Api
) -> None:
    key, _ = await head_after_one_mail(live)
    seen, _ = await client_until_new_mail(gateway_process, live, key, AHEAD, "after")
    (first, head, _), (second, mail_id, _) = seen
    assert first == "reset" and second == "new_mail"
    assert head is not None and mail_id is not None and head < mail_id < AHEAD


async def _compact_all_but_newest(url: str) -> int:
    """What the hourly sweep does once every event is past the retention window
    (services/scheduler.py compact_events, with a clock a day ahead)."""
    from datetime import timedelta

    from mailui4agents.db.engine import Database
    from mailui4agents.db.types import utcnow
    from mailui4agents.events import log

    db = Database(url)
    try:
        async with db.reader.connect() as conn, AsyncSession(conn) as s:
            point = await log.compaction_point(s, utcnow() + timedelta(days=1))
        async with db.writer.connect() as conn, AsyncSession(conn) as s:
            await log.compact(s, point)
            await s.commit()
        return point
    finally:
        await db.dispose()


def _database_url(gateway_process: GatewayProcess, request: pytest.FixtureRequest) -> str:
    if "--database-url" in gateway_process.extra_args:
        raw = str(request.getfixturevalue("pg_database"))
        return "postgresql+asyncpg://" + raw.split("://", 1)[1]
    return f"sqlite+aiosqlite:///{gateway_process.data_dir / 'agentmail.db'}"


@pytest.mark.live_both_backends
async def test_a_stream_resuming_from_before_the_window_is_reset_and_the_inbox_has_it_all(
    gateway_process: GatewayProcess, live: Api, request: pytest.FixtureRequest
) -> None:
    """Retention compacts old events; a client that resumes from below the floor
    would otherwise skip them in silence. It gets `reset`, catches up from the
    inbox (every unread mail is there), and then goes on live."""
    key = await live.agent("claude")
    await live.user("ana")
    for n in range(3):
        assert (await live.send("ana", ["claude@/srv/a"], subject=f"old {n}")).status_code == 201
    got = await collect(
        live.http, "/api/v1/agent/events", key, last_event_id=0, until=lambda g: len(g) >= 3
    )
    first_seen = got[0].id
    floor = await _compact_all_but_newest(_database_url(gateway_process, request))
    assert floor > first_seen

    seen, unread = await client_until_new_mail(gateway_process, live, key, first_seen, "new")
    (kind, _, reset), (after, _, mail) = seen
    assert kind == "reset" and after == "new_mail"
    assert reset["reason"] == "replay_window_exceeded"
    assert reset["message"] == WINDOW_EXCEEDED and reset["last_event_id"] == first_seen
    assert mail["subject"] == "new"
    assert sorted(unread) == ["new", "old 0", "old 1", "old 2"]

    # The negative control: resuming from the floor itself has lost nothing.
    async def send_after() -> None:
        assert (await live.send("ana", ["claude@/srv/a"], subject="later")).status_code == 201

    again = await collect(
        live.http,
        "/api/v1/agent/events",
        key,
        last_event_id=floor,
        on_open=send_after,
        until=lambda g: "later" in new_mails(g),
    )
    assert "reset" not in [g.type for g in again]
