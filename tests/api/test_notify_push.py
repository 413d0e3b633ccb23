"""The notification policy end to end (docs/remote.md, "Notification policy"): an
in-process gateway whose push sender posts over real HTTP to a push service of
our own (tests/fakes/push_service.py: it checks VAPID and decrypts like a
browser). What each device receives when a request opens, then from the
scheduler's reminder/escalation job with its clock moved forward, through the
real services/push.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from mailui4agents.db.reach_tables import PushOutboxRow
from mailui4agents.db.tables import PermissionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import scheduler
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, Api, make_settings, started_app
from tests.fakes.push_service import PushService, Subscription, push_service

# A push service of ours runs in a thread: kept out of the fast tier.
pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(scope="module")
def pushsvc() -> Iterator[PushService]:
    with push_service() as svc:
        yield svc


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, pushsvc: PushService
) -> Settings:
    return make_settings(
        request,
        tmp_path,
        db_backend,
        push_endpoint_allow=(f"{pushsvc.url}/push/",),
        push_retry_base_s=0.01,
        scheduler_interval_s=3600.0,  # the test runs the passes, with its own clock
    )


@dataclass
class World:
    api: Api
    app: FastAPI
    svc: PushService
    sid: str

    @property
    def gw(self) -> Gateway:
        gw: Gateway = self.app.state.gateway
        return gw

    async def phone(self, person: str) -> Subscription:
        sub = self.svc.make_subscription()
        r = await self.api.http.post(
            "/api/v1/push/subscriptions",
            json={**sub.to_json(), "device_name": f"{person}'s phone"},
            headers=self.api.auth(person),
        )
        assert r.status_code == 201, r.text
        return sub

    async def policy(self, person: str, **body: Any) -> None:
        r = await self.api.http.put(
            "/api/v1/me/notify-policy", json=body, headers=self.api.auth(person)
        )
        assert r.status_code == 200, r.text

    async def ask(self) -> tuple[str, datetime]:
        r = await self.api.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": self.sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
                  "tool_input": {"command": "make deploy"}},
            headers=self.api.auth("bot"),
        )  # fmt: skip
        assert r.status_code == 201, r.text
        async with self.gw.read() as s:
            row = await s.get(PermissionRow, r.json()["id"])
            assert row is not None
            return row.id, row.created_at

    async def settle(self, request_id: str) -> int:
        """Wait until every push queued for the request is final; how many there are."""
        async with self.gw.read() as s:
            ids = list(
                await s.scalars(
                    select(PushOutboxRow.id).where(PushOutboxRow.request_id == request_id)
                )
            )
        assert self.gw.push is not None
        await self.gw.push.wait_final(ids, 10.0)
        return len(ids)

    def got(self, sub: Subscription, request_id: str) -> list[dict[str, Any]]:
        return [m.payload for m in self.svc.received(sub.name) if m.payload["tag"] == request_id]


@pytest.fixture
async def world(settings: Settings, pushsvc: PushService) -> AsyncIterator[World]:
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            for name in ("ana", "bob"):
                await api.user(name)
            await api.agent("bot")
            r = await api.send("ana", ["bot@/srv/shop.new"], subject="deploy")
            assert r.status_code == 201, r.text
            sid = r.json()["session_id"]
            r = await http.post(
                f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
            )
            assert r.status_code in (200, 201), r.text
            yield World(api, app, pushsvc, sid)


async def test_the_owner_first_a_reminder_then_the_escalation(world: World) -> None:
    ana, bob = await world.phone("ana"), await world.phone("bob")
    await world.policy("ana", remind_after_min=5, escalate_after_min=10)
    rid, t0 = await world.ask()
    [first] = [m.payload for m in await world.svc.wait_async(1, ana.name)]
    assert first["tag"] == rid and not first["title"].startswith(("Reminder", "Escalated"))
    assert await world.settle(rid) == 1  # ana's only: bob is held back
    assert world.got(bob, rid) == []

    result = await scheduler.remind_and_escalate(world.gw, t0 + timedelta(minutes=5))
    assert (result.claimed, result.pushed) == (1, 1)
    await world.svc.wait_async(2, ana.name)
    [_, reminder] = world.got(ana, rid)
    assert reminder["title"].startswith("Reminder: ") and reminder["tag"] == rid
    assert reminder["actions"] == first["actions"]

    await scheduler.remind_and_escalate(world.gw, t0 + timedelta(minutes=10))
    [escalation] = [m.payload for m in await world.svc.wait_async(1, bob.name)]
    assert escalation["title"].startswith("Escalated: ") and escalation["tag"] == rid
    # The escalated push decides, as any push does.
    r = await world.api.http.post(
        "/api/v1/push/actions", json={"token": escalation["action_token"], "action": "approve"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["decided_by"] == "bob"
    # Nothing more, however late: each step went once and the request is decided.
    assert (await scheduler.remind_and_escalate(world.gw, t0 + timedelta(hours=3))).claimed == 0
    await world.settle(rid)
    assert [p["title"][:9] for p in world.got(ana, rid) if p["type"] == "permission_request"] == [
        first["title"][:9],
        "Reminder:",
    ]
    assert len([p for p in world.got(bob, rid) if p["type"] == "permission_request"]) == 1


async def test_quiet_hours_and_push_content_reach_the_device(world: World) -> None:
    ana, bob = await world.phone("ana"), await world.phone("bob")
    # bob is in quiet hours all day but two minutes from a minute from now (UTC):
    # the escalation, 5 minutes after the request opened, skips him.
    now = utcnow() + timedelta(minutes=1)
    later = now + timedelta(minutes=2)
    await world.policy(
        "bob",
        quiet_start=f"{later.hour:02d}:{later.minute:02d}",
        quiet_end=f"{now.hour:02d}:{now.minute:02d}",
    )
    await world.policy("ana", escalate_after_min=5, push_content="none")
    rid, t0 = await world.ask()
    [first] = [m.payload for m in await world.svc.wait_async(1, ana.name)]
    assert first["title"] == "An approval is waiting" and "make deploy" not in str(first)
    result = await scheduler.remind_and_escalate(world.gw, t0 + timedelta(minutes=5))
    assert (result.claimed, result.pushed, result.skipped) == (1, 0, 1)
    await world.settle(rid)
    assert world.got(bob, rid) == []
