"""The keys of "waiting for you" notices (services/waiting.py) are swept after a
day: the same turn may then notify again, which no platform does that late."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from mailui4agents.db.types import utcnow
from mailui4agents.services import waiting
from mailui4agents.state import Gateway
from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_a_turns_key_is_swept_after_a_day_and_not_before(api: Api) -> None:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    await api.user("ana")
    await api.agent("claude", owners=["admin", "ana"])
    r = await api.send("ana", ["claude@/srv/shop"], subject=uuid.uuid4().hex)
    assert r.status_code == 201, r.text
    url = f"/api/v1/agent/sessions/{r.json()['session_id']}/waiting"
    body = {"kind": "input", "message": "waiting", "turn": "p1"}

    async def post() -> bool:
        got = await api.http.post(url, json=body, headers=api.auth("claude"))
        assert got.status_code == 200, got.text
        return bool(got.json()["deduplicated"])

    assert await post() is False
    async with gw.write() as s:
        assert await waiting.sweep(s, utcnow() + timedelta(hours=23)) == 0
    assert await post() is True
    async with gw.write() as s:
        assert await waiting.sweep(s, utcnow() + timedelta(seconds=waiting.KEEP_S + 60)) == 1
    assert await post() is False
