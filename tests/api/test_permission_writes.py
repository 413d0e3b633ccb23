"""What the permission writes (services/permission_requests.py and
services/permission_decisions.py: one query before each write, the events in the
receipt's one INSERT) must keep: who is told of a request and of its decision, and
that a request past its deadline is never approved, even before the scheduler's
sweep reaches it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select, update

from mailui4agents.db.tables import EventRow, PermissionRow
from mailui4agents.db.types import utcnow
from mailui4agents.settings import Settings
from tests.conftest import Api, make_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    # No sweep during a test: only a decision can expire a request here.
    return make_settings(request, tmp_path, db_backend, scheduler_interval_s=3600.0)


async def _world(api: Api) -> str:
    """ana owns a session with claude, carl is cc'd in, bob is a named decider."""
    for name in ("ana", "bob", "carl"):
        await api.user(name)
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="work", cc=["carl@/srv/shop"])
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code < 300, r.text
    return sid


async def _ask(api: Api, sid: str, key: str) -> dict[str, Any]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "tool_name": "Bash", "tool_input": {"command": "make"},
              "relay_key": key},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _events(api: Api, after: int = 0) -> list[EventRow]:
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.read() as s:
        rows = await s.scalars(select(EventRow).where(EventRow.id > after).order_by(EventRow.id))
        return list(rows.all())


async def _overdue(api: Api, request_id: str) -> None:
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.write() as s:
        await s.execute(
            update(PermissionRow)
            .where(PermissionRow.id == request_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )


def _told(events: list[EventRow], type_: str) -> list[str]:
    return sorted(e.principal for e in events if e.type == type_)


async def test_a_request_and_its_decision_reach_the_deciders_and_the_agent_only(
    api: Api,
) -> None:
    sid = await _world(api)
    start = max((e.id for e in await _events(api)), default=0)
    req = await _ask(api, sid, "k1")
    asked = await _events(api, start)
    # The deciders (ana the owner, bob named by her): the mail and the request;
    # carl, only cc'd, is told nothing; neither is the agent that asked.
    assert _told(asked, "new_mail") == ["user:ana", "user:bob"]
    assert _told(asked, "permission_request") == ["user:ana", "user:bob"]
    assert all(e.data["id"] == req["id"] for e in asked if e.type == "permission_request")
    assert [e.type for e in asked][-2:] == ["permission_request"] * 2  # after the mail's
    r = await api.http.post(
        f"/api/v1/permissions/{req['id']}/decision",
        json={"decision": "approve", "note": "ok"},
        headers=api.auth("bob"),
    )
    assert r.status_code == 200, r.text
    decided = await _events(api, asked[-1].id)
    assert _told(decided, "new_mail") == ["agent:claude"]  # the receipt
    assert _told(decided, "permission_decision") == ["agent:claude", "user:ana", "user:bob"]
    for e in decided:
        if e.type == "permission_decision":
            assert e.data["request_id"] == req["id"], e.data
            assert (e.data["status"], e.data["decided_by"]) == ("approved", "bob"), e.data


async def test_carl_who_is_only_cc_d_may_not_decide(api: Api) -> None:
    sid = await _world(api)
    req = await _ask(api, sid, "k1")
    r = await api.http.post(
        f"/api/v1/permissions/{req['id']}/decision",
        json={"decision": "approve"},
        headers=api.auth("carl"),
    )
    assert r.status_code == 403, r.text  # he reads the session: not a 404
    await api.user("dan")  # who takes no part at all: the request does not exist
    r = await api.http.post(
        f"/api/v1/permissions/{req['id']}/decision",
        json={"decision": "approve"},
        headers=api.auth("dan"),
    )
    assert r.status_code == 404, r.text


async def test_a_request_past_its_deadline_is_not_approved_before_the_sweep(api: Api) -> None:
    sid = await _world(api)
    req = await _ask(api, sid, "k1")
    await _overdue(api, req["id"])
    r = await api.http.post(
        f"/api/v1/permissions/{req['id']}/decision",
        json={"decision": "approve"},
        headers=api.auth("ana"),
    )
    assert r.status_code == 409, r.text
    assert r.json()["error"]["message"] == "request already expired: timed out 0 s ago", r.text
    assert r.json()["error"]["channel"] == "system", r.text


async def test_deciding_expires_what_else_is_overdue_in_the_session(api: Api) -> None:
    sid = await _world(api)
    late = await _ask(api, sid, "late")
    now = await _ask(api, sid, "now")
    await _overdue(api, late["id"])
    r = await api.http.post(
        f"/api/v1/permissions/{now['id']}/decision",
        json={"decision": "deny", "note": "no"},
        headers=api.auth("ana"),
    )
    assert r.status_code == 200 and r.json()["status"] == "denied", r.text
    r = await api.http.get(f"/api/v1/agent/permissions/{late['id']}", headers=api.auth("claude"))
    assert r.json()["status"] == "expired", r.text
    told = [e for e in await _events(api) if e.type == "permission_decision"]
    assert {(e.data["request_id"], e.data["status"]) for e in told} == {
        (late["id"], "expired"),
        (now["id"], "denied"),
    }


async def test_decisions_at_once_decide_once(api: Api) -> None:
    """The decision's UPDATE is conditional (status still pending): on
    PostgreSQL both deciders read `pending`, the second UPDATE waits for the
    first's commit and then matches nothing (409), never a second decision."""
    sid = await _world(api)
    req = await _ask(api, sid, "k1")
    answers: list[Any] = []

    async def one(who: str, decision: str) -> None:
        answers.append(
            await api.http.post(
                f"/api/v1/permissions/{req['id']}/decision",
                json={"decision": decision},
                headers=api.auth(who),
            )
        )

    async with anyio.create_task_group() as tg:
        for who, decision in [("ana", "approve"), ("bob", "deny")] * 3:
            tg.start_soon(one, who, decision)
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [409] * 5, [r.text for r in answers]
    told = [e for e in await _events(api) if e.type == "permission_decision"]
    assert len({e.data["status"] for e in told}) == 1 and len(told) == 3  # claude, ana, bob
