"""Enforcement levels reported by agents and snapshotted by sessions (docs/behaviour.md)."""

from __future__ import annotations

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


async def test_an_unscoped_agent_reads_only_mail_addressed_to_it(api: Api) -> None:
    """Without a scope session an agent reads the mail sent to it (a bridge catching
    up) and nothing else of the session: the boundary is never opt-in."""
    await api.agent("claude")
    await api.user("ana")
    await api.user("bob")
    m = (await api.send("ana", ["claude@/srv/shop.new"], subject="x")).json()
    r = await api.http.get(f"/api/v1/agent/mail/{m['id']}", headers=api.auth("claude"))
    assert r.status_code == 200
    # ana's reply to bob in the same session is not addressed to claude.
    other = (await api.send("ana", ["bob@/srv/shop"], subject="y", parent_mail_id=m["id"])).json()
    r = await api.http.get(f"/api/v1/agent/mail/{other['id']}", headers=api.auth("claude"))
    assert r.status_code == 404
    scoped = await api.http.get(
        f"/api/v1/agent/mail/{other['id']}",
        params={"session_id": m["session_id"]},
        headers=api.auth("claude"),
    )
    assert scoped.status_code == 200
    thread = await api.http.get(f"/api/v1/agent/mail/{m['id']}/thread", headers=api.auth("claude"))
    assert thread.status_code == 400
    assert thread.json()["error"]["field"] == "session_id"
