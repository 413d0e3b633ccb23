"""Event retention (events/log.py, services/scheduler.compact_events): events older
than the window are compacted up to a floor marker, the newest event never (SQLite
would hand its id out again), a long backlog over several bounded compactions, and
nothing with `event_retention_days = 0`. The stream's side (a `reset` below the
floor) is tests/e2e/test_stream_reset.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from mailui4agents.app import start_gateway
from mailui4agents.db.tables import EventRow
from mailui4agents.db.types import utcnow
from mailui4agents.events import log
from mailui4agents.services import scheduler
from mailui4agents.state import Gateway
from tests.conftest import fast_settings

pytestmark = pytest.mark.anyio

DAY = timedelta(days=1)


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    gateway, _ = await start_gateway(fast_settings(tmp_path, event_retention_days=30))
    try:
        yield gateway
    finally:
        await gateway.db.dispose()


async def _events(gw: Gateway, ages_days: list[float]) -> list[int]:
    """One event per age (oldest first), dated that many days ago; their ids."""
    now = utcnow()
    async with gw.write() as s:
        start = await log.last_id(s)
        await log.append_rows(
            s, [(f"agent:a{i}", "new_mail", {"n": i}) for i in range(len(ages_days))]
        )
        ids = list(range(start + 1, start + 1 + len(ages_days)))
        for event_id, age in zip(ids, ages_days, strict=True):
            await s.execute(
                update(EventRow).where(EventRow.id == event_id).values(created_at=now - age * DAY)
            )
    return ids


async def _left(gw: Gateway) -> list[tuple[int, str]]:
    async with gw.read() as s:
        rows = await s.execute(select(EventRow.id, EventRow.principal).order_by(EventRow.id))
        return [(int(r[0]), str(r[1])) for r in rows]


async def test_events_past_the_window_are_compacted_to_a_floor(gw: Gateway) -> None:
    ids = await _events(gw, [40, 35, 31, 29, 1])
    assert [i for i, _ in await _left(gw)] == ids  # a new gateway's log holds only these
    assert await scheduler.compact_events(gw, utcnow()) == 2
    assert await _left(gw) == [(ids[2], log.COMPACTED), *[(i, f"agent:a{n}") for n, i in
                               list(enumerate(ids))[3:]]]  # fmt: skip
    async with gw.read() as s:
        assert await log.floor(s) == ids[2]
    assert await scheduler.compact_events(gw, utcnow()) == 0  # nothing more is due


async def test_the_newest_event_is_never_compacted(gw: Gateway) -> None:
    ids = await _events(gw, [90, 80])
    await scheduler.compact_events(gw, utcnow())
    left = await _left(gw)
    assert left == [(ids[0], log.COMPACTED), (ids[1], "agent:a1")]
    async with gw.write() as s:
        await log.append_rows(s, [("agent:x", "new_mail", {})])
    assert (await _left(gw))[-1][0] == ids[1] + 1  # a fresh id, not a reused one


async def test_a_long_backlog_is_worked_off_in_bounded_compactions(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log, "COMPACT_BATCH", 3)
    monkeypatch.setattr(log, "COMPACT_MOST", 6)
    monkeypatch.setattr(scheduler, "COMPACTIONS_PER_SWEEP", 2)
    ids = await _events(gw, [50.0 - i for i in range(20)] + [0])
    await scheduler.compact_events(gw, utcnow())
    async with gw.read() as s:
        first = await log.floor(s)
    assert ids[0] < first < ids[19]  # two bounded steps: not everything yet
    for _ in range(10):
        await scheduler.compact_events(gw, utcnow())
    async with gw.read() as s:
        assert await log.floor(s) == ids[19]
        assert await s.scalar(select(func.count()).select_from(EventRow)) == 2


async def test_a_retention_of_zero_keeps_every_event(tmp_path: Path) -> None:
    gateway, _ = await start_gateway(fast_settings(tmp_path, event_retention_days=0))
    try:
        await _events(gateway, [400, 300, 0])
        before = await _left(gateway)
        assert await scheduler.compact_events(gateway, utcnow() + 1000 * DAY) == 0
        assert await _left(gateway) == before
    finally:
        await gateway.db.dispose()
