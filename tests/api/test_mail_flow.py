"""Sending, routing and reading mail through the human and agent routes."""

from __future__ import annotations

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_mail_to_new_session_gets_its_alias_at_once(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug")
    assert r.status_code == 201, r.text
    mail = r.json()
    assert mail["session_alias"] == "claude-fix-login-bug"
    assert mail["workspace"] == "/srv/shop"
    assert mail["to"] == ["claude@/srv/shop.claude-fix-login-bug"]
    assert mail["from"] == "ana@/srv/shop.claude-fix-login-bug"
    assert mail["reply_address"] == "claude@/srv/shop.claude-fix-login-bug"
    assert mail["self_address"] == "ana@/srv/shop.claude-fix-login-bug"


async def test_agent_inbox_row_carries_reply_and_self_address(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug", body="details")
    r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert item["from_human"] is True
    assert item["reply_address"] == "ana@/srv/shop.claude-fix-login-bug"
    assert item["self_address"] == "claude@/srv/shop.claude-fix-login-bug"
    assert item["body"] == "details"
    assert item["permission_mode"] == "workspace"


async def test_catch_up_rows_carry_exactly_what_the_live_event_carries(api: Api) -> None:
    """Catch-up delivery rebuilds the live event from an inbox row; a field missing
    there once turned a full-mode session into workspace mode."""
    from sqlalchemy import select

    from mailui4agents.db.tables import EventRow
    from mailui4agents.services.wire_shapes import NEW_MAIL_FIELDS

    await api.agent("claude")
    await api.user("ana")
    await api.send("ana", ["claude@/srv/shop.new"], subject="Mode", permission_mode="full")
    r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    [item] = r.json()["items"]
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.read() as s:
        [event] = (
            await s.scalars(select(EventRow).where(EventRow.principal == "agent:claude"))
        ).all()
    assert set(event.data) == set(NEW_MAIL_FIELDS)
    assert {k: item[k] for k in NEW_MAIL_FIELDS} == event.data
    assert item["permission_mode"] == "full"
