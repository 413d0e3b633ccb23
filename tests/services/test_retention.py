"""Retention of the read log and of finished requests (services/retention.py,
scheduler.apply_retention), on SQLite and PostgreSQL: rows past the window go,
with a request's deliveries; rows inside it, pending requests and everything
with a window of 0 stay. Time is moved by dating rows back, not by waiting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from mailui4agents.db.reach_tables import RequestDeliveryRow
from mailui4agents.db.tables import PermissionRow, ReadLogRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import retention, scheduler
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import Api, make_settings

pytestmark = pytest.mark.anyio

DAY = timedelta(days=1)


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(
        request, tmp_path, db_backend, scheduler_interval_s=3600.0,
        read_log_retention_days=90, request_retention_days=365,
    )  # fmt: skip


def gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def ask(api: Api, sid: str, key: str) -> str:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "tool_name": "Bash", "tool_input": {"command": "make"},
              "relay_key": key},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


async def decide(api: Api, rid: str) -> None:
    r = await api.http.post(
        f"/api/v1/permissions/{rid}/decision", json={"decision": "approve"},
        headers=api.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 200, r.text


async def world(api: Api) -> tuple[str, list[str]]:
    """ana's session with claude: three requests (decided, decided, pending) and
    reads of its mail (read-log rows)."""
    await api.user("ana")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="work")
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    rids = [await ask(api, sid, f"k{i}") for i in range(3)]
    await decide(api, rids[0])
    await decide(api, rids[1])
    for _ in range(3):
        r = await api.http.get(
            "/api/v1/agent/inbox", params={"session_id": sid}, headers=api.auth("claude")
        )
        assert r.status_code == 200, r.text
    return sid, rids


async def read_log_ids(gw: Gateway) -> list[int]:
    async with gw.read() as s:
        return list((await s.scalars(select(ReadLogRow.id).order_by(ReadLogRow.id))).all())


async def request_ids(gw: Gateway) -> set[str]:
    async with gw.read() as s:
        return set((await s.scalars(select(PermissionRow.id))).all())


async def test_rows_past_the_window_go_and_the_rest_stay(api: Api) -> None:
    _, rids = await world(api)
    gw = gateway(api)
    logs = await read_log_ids(gw)
    assert len(logs) >= 3
    now = utcnow()
    async with gw.write() as s:
        # The oldest read-log rows 100 days old (past 90), the rest 10 days.
        old_logs = logs[: len(logs) // 2]
        await s.execute(update(ReadLogRow).values(at=now - 10 * DAY))
        await s.execute(
            update(ReadLogRow).where(ReadLogRow.id.in_(old_logs)).values(at=now - 100 * DAY)
        )
        # rids[0] decided long ago, rids[1] decided recently, rids[2] pending but
        # dated back: only a finished request goes.
        for rid, age in ((rids[0], 400), (rids[1], 30), (rids[2], 400)):
            await s.execute(
                update(PermissionRow)
                .where(PermissionRow.id == rid)
                .values(expires_at=now - age * DAY, created_at=now - (age + 1) * DAY)
            )
        s.add(RequestDeliveryRow(request_id=rids[0], channel="web", state="decided"))
        s.add(RequestDeliveryRow(request_id=rids[1], channel="web", state="decided"))

    assert await scheduler.apply_retention(gw, now) == (len(old_logs), 1)

    assert await read_log_ids(gw) == logs[len(old_logs) :]
    assert await request_ids(gw) == {rids[1], rids[2]}
    async with gw.read() as s:
        kept = (await s.scalars(select(RequestDeliveryRow.request_id))).all()
    assert list(kept) == [rids[1]]  # the deleted request's delivery went with it
    # A second pass finds nothing due and writes nothing.
    assert await scheduler.apply_retention(gw, now) == (0, 0)


async def test_a_long_backlog_goes_in_bounded_batches(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await world(api)
    gw = gateway(api)
    monkeypatch.setattr(retention, "BATCH", 1)
    monkeypatch.setattr(scheduler, "RETENTION_BATCHES", 2)
    now = utcnow()
    async with gw.write() as s:
        await s.execute(update(ReadLogRow).values(at=now - 100 * DAY))
        total = int(await s.scalar(select(func.count()).select_from(ReadLogRow)) or 0)
    assert total >= 3
    assert (await scheduler.apply_retention(gw, now))[0] == 2  # this sweep's share
    assert len(await read_log_ids(gw)) == total - 2  # the next sweep goes on


async def test_a_window_of_0_keeps_everything(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    _, rids = await world(api)
    gw = gateway(api)
    keep_all = gw.settings.model_copy(
        update={"read_log_retention_days": 0, "request_retention_days": 0}
    )
    monkeypatch.setattr(gw, "settings", keep_all)
    now = utcnow()
    async with gw.write() as s:
        await s.execute(update(ReadLogRow).values(at=now - 10_000 * DAY))
        await s.execute(update(PermissionRow).values(expires_at=now - 10_000 * DAY))
    before = await read_log_ids(gw)
    assert await scheduler.apply_retention(gw, now) == (0, 0)
    assert await read_log_ids(gw) == before
    assert await request_ids(gw) == set(rids)
