"""Enforcement levels reported by agents and snapshotted by sessions (SPEC §7.2)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import EventRow
from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def heartbeat(api: Api, **body: Any) -> Any:
    r = await api.http.post("/api/v1/agent/heartbeat", json=body, headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    return r.json()


async def session_of(api: Api, sid: str) -> dict[str, Any]:
    r = await api.http.get(f"/api/v1/sessions/{sid}", headers=api.auth("ana"))
    return dict(r.json())


async def test_new_session_snapshots_the_agents_reported_enforcement(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    assert (await heartbeat(api, mode_enforcement="partial"))["mode_enforcement"] == "partial"
    m = (await api.send("ana", ["claude@/srv/shop.new"], subject="x")).json()
    assert m["permission_enforcement"] == "partial"


async def test_unknown_enforcement_is_advisory_and_known_values_are_kept(api: Api) -> None:
    await api.agent("claude")
    for value, want in [
        ("NATIVE", "advisory"),
        ("strong", "advisory"),
        (3, "advisory"),
        (None, "advisory"),
        ("native", "native"),
        ("partial", "partial"),
        ("advisory", "advisory"),
    ]:
        assert (await heartbeat(api, mode_enforcement=value))["mode_enforcement"] == want


async def test_a_changed_enforcement_updates_active_sessions_and_tells_participants(
    api: Api,
) -> None:
    await api.agent("claude")
    await api.user("ana")
    m = (await api.send("ana", ["claude@/srv/shop.new"], subject="x")).json()
    assert (await session_of(api, m["session_id"]))["permission_enforcement"] == "advisory"
    await heartbeat(api, mode_enforcement="native")
    assert (await session_of(api, m["session_id"]))["permission_enforcement"] == "native"
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.read() as s:
        updates = (
            await s.scalars(
                select(EventRow).where(
                    EventRow.principal == "user:ana", EventRow.type == "session_update"
                )
            )
        ).all()
    assert [u.data["permission_enforcement"] for u in updates] == ["native"]
    # The same level again changes nothing and sends nothing.
    await heartbeat(api, mode_enforcement="native")
    async with gw.db.read() as s:
        again = (await s.scalars(select(EventRow).where(EventRow.type == "session_update"))).all()
    assert len(again) == 2  # one for ana, one for claude


async def test_a_read_without_scope_is_allowed_but_logged_with_the_agents_name(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    await api.agent("claude")
    await api.user("ana")
    m = (await api.send("ana", ["claude@/srv/shop.new"], subject="x")).json()
    with caplog.at_level(logging.WARNING, logger="mailui4agents.scope"):
        r = await api.http.get(f"/api/v1/agent/mail/{m['id']}", headers=api.auth("claude"))
    assert r.status_code == 200
    assert any("claude" in rec.getMessage() for rec in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mailui4agents.scope"):
        await api.http.get(
            f"/api/v1/agent/mail/{m['id']}?session_id={m['session_id']}",
            headers=api.auth("claude"),
        )
    assert not caplog.records
