"""Whom a request is pushed to as it opens (notify_policy.first_push) and the
scheduler's reminder/escalation job (services/notify_due.py,
scheduler.remind_and_escalate), on SQLite and PostgreSQL. The clock is a
parameter: tests move time instead of waiting. The pushes go to a stand-in
sender that records them (the real one, services/push.py, is tested end to end
in tests/e2e/test_notify_push_e2e.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text

from mailui4agents.db.engine import Database
from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import notify_due, notify_policy, scheduler
from mailui4agents.services.access import deciders
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import Api, make_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    # The app's own scheduler stays out of the way: the tests run the passes.
    return make_settings(request, tmp_path, db_backend, scheduler_interval_s=3600.0)


class Sent:
    """A stand-in for push.queue_request: records (request, kind, people)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    async def __call__(
        self,
        s: Any,
        row: PermissionRow,
        session: SessionRow,
        people: Mapping[str, notify_policy.Policy],
        kind: str,
    ) -> int:
        assert row.status == "pending" and session.id == row.session_id
        self.calls.append((row.id, kind, sorted(people)))
        return len(people)


def gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def world(api: Api) -> str:
    """ana owns a session with claude; bob is a decider she named."""
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="work")
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code < 300, r.text
    return sid


async def policy(api: Api, who: str, **body: Any) -> None:
    r = await api.http.put("/api/v1/me/notify-policy", json=body, headers=api.auth(who))
    assert r.status_code == 200, r.text


async def ask(api: Api, sid: str, key: str = "k1") -> tuple[str, datetime]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "tool_name": "Bash", "tool_input": {"command": "make"},
              "relay_key": key},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    async with gateway(api).read() as s:
        row = await s.get(PermissionRow, rid)
        assert row is not None
        return rid, row.created_at


def hhmm(t: datetime) -> str:
    return f"{t.hour:02d}:{t.minute:02d}"


async def test_first_push_follows_each_policy(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)

    async def first(now: datetime) -> list[str]:
        async with gw.read() as s:
            return sorted(await notify_policy.first_push(s, sid, await deciders(s, sid), now))

    now = utcnow()
    assert await first(now) == ["ana", "bob"]
    await policy(api, "ana", escalate_after_min=10)
    assert await first(now) == ["ana"]  # bob is held back
    # ... also when ana is not among those asked about (push.py passes only the
    # deciders with a device): the hold is the session's, as the escalation's is.
    async with gw.read() as s:
        assert await notify_policy.first_push(s, sid, ["bob"], now) == {}
        assert list(await notify_policy.first_push(s, sid, ["ana"], now)) == ["ana"]
    # ana in quiet hours: she holds nobody back, and is not pushed herself.
    await policy(api, "ana", quiet_start=hhmm(now), quiet_end=hhmm(now + timedelta(hours=2)))
    assert await first(now) == ["bob"]
    await policy(api, "ana", quiet_start=None, quiet_end=None, escalate_after_min=None)
    await policy(api, "bob", push=False)
    assert await first(now) == ["ana"]
    # ana's page is visible: not pushed; unless she wants pushes anyway.
    r = await api.http.post("/api/v1/me/presence", json={"visible": True}, headers=api.auth("ana"))
    assert r.status_code == 200
    assert await first(utcnow()) == []
    await policy(api, "ana", skip_when_visible=False)
    assert await first(utcnow()) == ["ana"]


async def test_a_reminder_is_claimed_once_even_by_two_passes_racing(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "ana", remind_after_min=5)
    rid, t0 = await ask(api, sid)
    sent = Sent()
    # Before its time nothing is due.
    assert (await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=4), sent)).claimed == 0
    at = t0 + timedelta(minutes=5)
    # Two passes read the same plan before either claims (the race's worst case).
    async with gw.read() as s:
        one = await notify_due.plan(s, at)
    async with gw.read() as s:
        two = await notify_due.plan(s, at + timedelta(seconds=3))
    assert [d.step.kind for d in one] == ["reminder"] == [d.step.kind for d in two]
    async with gw.write() as s:
        assert await notify_due.claim(s, one[0])
        await notify_due.send(s, one[0], sent)
    async with gw.write() as s:
        assert not await notify_due.claim(s, two[0])  # the mark moved past ana's time
    assert sent.calls == [(rid, "reminder", ["ana"])]
    # Whole passes later: nothing more for ana (bob has no reminder set).
    for minutes in (6, 30, 600):
        assert (
            await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=minutes), sent)
        ).claimed == 0
    assert sent.calls == [(rid, "reminder", ["ana"])]


async def test_two_passes_at_once_send_one_reminder(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "ana", remind_after_min=5)
    await policy(api, "bob", remind_after_min=5)
    rid, t0 = await ask(api, sid)
    sent = Sent()
    at = t0 + timedelta(minutes=5, seconds=1)
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(scheduler.remind_and_escalate, gw, at, sent)
    assert sent.calls == [(rid, "reminder", ["ana", "bob"])]


async def test_the_claim_waits_for_a_concurrent_one_on_postgresql(
    api: Api, settings: Settings
) -> None:
    """Two replicas' transactions claim the same reminder at once: the second's
    UPDATE waits for the first's row lock, then finds the mark moved and claims
    nothing (READ COMMITTED re-checks the condition). SQLite has one writer."""
    sid = await world(api)
    await policy(api, "ana", remind_after_min=5)
    _, t0 = await ask(api, sid)
    gw = gateway(api)
    async with gw.read() as s:
        (due,) = await notify_due.plan(s, t0 + timedelta(minutes=5))
    if gw.db.is_sqlite:  # one writer at a time: the second claim comes after the first
        async with gw.write() as s:
            assert await notify_due.claim(s, due)
        async with gw.write() as s:
            assert not await notify_due.claim(s, due)
        return
    other = Database(settings.resolved_database_url())
    second: list[bool] = []
    try:
        async with gw.db.write() as s1:
            assert await notify_due.claim(s1, due)

            async def claim_too() -> None:
                async with other.write() as s2:
                    second.append(await notify_due.claim(s2, due))

            async with anyio.create_task_group() as tg:
                tg.start_soon(claim_too)
                with anyio.fail_after(20):  # until the second UPDATE waits on the lock
                    while True:
                        async with gw.db.read() as r:
                            waiting = await r.scalar(
                                text(
                                    "SELECT count(*) FROM pg_stat_activity WHERE "
                                    "wait_event_type = 'Lock' AND query LIKE 'UPDATE permissions%'"
                                )
                            )
                        if waiting:
                            break
                        await anyio.lowlevel.checkpoint()
                await s1.commit()
        assert second == [False]
    finally:
        await other.dispose()


async def test_nothing_after_the_request_was_decided(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "ana", remind_after_min=5, escalate_after_min=10)
    rid, t0 = await ask(api, sid)
    r = await api.http.post(
        f"/api/v1/permissions/{rid}/decision", json={"decision": "approve"}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    sent = Sent()
    for minutes in (5, 10, 60):
        result = await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=minutes), sent)
        assert result.claimed == 0
    assert sent.calls == []
    # A plan read before the decision cannot claim it after.
    rid2, t1 = await ask(api, sid, "k2")
    async with gw.read() as s:
        stale = await notify_due.plan(s, t1 + timedelta(minutes=10))
    assert {d.step.kind for d in stale} == {"reminder", "escalation"}
    r = await api.http.post(
        f"/api/v1/permissions/{rid2}/decision", json={"decision": "deny"}, headers=api.auth("bob")
    )
    assert r.status_code == 200, r.text
    for due in stale:
        async with gw.write() as s:
            assert not await notify_due.claim(s, due)


async def test_escalation_reaches_the_other_deciders_after_m_minutes(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "ana", escalate_after_min=10)
    rid, t0 = await ask(api, sid)
    sent = Sent()
    await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=9, seconds=59), sent)
    assert sent.calls == []
    result = await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=10), sent)
    assert (result.claimed, result.pushed) == (1, 1)
    assert sent.calls == [(rid, "escalation", ["bob"])]
    await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=30), sent)
    assert sent.calls == [(rid, "escalation", ["bob"])]  # once
    async with gw.read() as s:
        row = await s.get(PermissionRow, rid)
        assert row is not None and row.escalated_at == t0 + timedelta(minutes=10)


async def test_no_escalation_without_an_owner_asking_for_it(api: Api) -> None:
    # negative control: bob's own escalate_after_min means nothing (he owns nothing)
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "bob", escalate_after_min=5)
    _, t0 = await ask(api, sid)
    sent = Sent()
    assert (await scheduler.remind_and_escalate(gw, t0 + timedelta(hours=2), sent)).claimed == 0
    assert sent.calls == []


async def test_nothing_during_quiet_hours(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    _, probe = await ask(api, sid, "probe")
    # Quiet for both from 5 minutes after the request opened, for an hour (UTC).
    start, end = hhmm(probe + timedelta(minutes=6)), hhmm(probe + timedelta(minutes=66))
    await policy(api, "ana", remind_after_min=10, escalate_after_min=15)
    await policy(api, "bob", quiet_start=start, quiet_end=end)
    await policy(api, "ana", quiet_start=start, quiet_end=end)
    rid, t0 = await ask(api, sid, "k")
    sent = Sent()
    for minutes in (10, 15, 20, 40):
        await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=minutes), sent)
    assert [c for c in sent.calls if c[0] == rid] == []
    # negative control: the same without quiet hours sends both
    await policy(api, "ana", quiet_start=None, quiet_end=None)
    await policy(api, "bob", quiet_start=None, quiet_end=None)
    rid2, t1 = await ask(api, sid, "k2")
    await scheduler.remind_and_escalate(gw, t1 + timedelta(minutes=15), sent)
    assert sorted(c[1:] for c in sent.calls if c[0] == rid2) == [
        ("escalation", ["bob"]),
        ("reminder", ["ana"]),
    ]


async def test_a_failed_push_rolls_the_claim_back(api: Api) -> None:
    sid = await world(api)
    gw = gateway(api)
    await policy(api, "ana", remind_after_min=5)
    rid, t0 = await ask(api, sid)

    async def broken(*args: Any) -> int:
        raise RuntimeError("push service down")

    with pytest.raises(RuntimeError):
        await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=5), broken)
    sent = Sent()
    await scheduler.remind_and_escalate(gw, t0 + timedelta(minutes=5, seconds=10), sent)
    assert sent.calls == [(rid, "reminder", ["ana"])]
