"""Reading the audit trail, `GET /api/v1/audit` (docs/audit.md): from every side
(anonymous, the agent, another agent, the owner, a cc'd reader, another human,
an admin), its filters, its pages and its limits; and that no route of the API,
tried with every method from every side against an audit row's id, changes or
deletes a row. In-process gateway on a real SQLite file and on PostgreSQL."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.audit_tables import AuditRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.times import rfc3339
from tests.api.test_audit_trail import gateway_of
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def day(api: Api) -> dict[str, Any]:
    return await build_day(api)


async def build_day(api: Api) -> dict[str, Any]:
    """Two sessions of agent `claude`: ana owns one (carl is cc'd), bob the other;
    dan is in neither; `codex` is another agent; root is an admin in neither.
    In ana's: ana approves, denies with a note, the session goes to full mode and
    the mode answers; in bob's: bob approves."""
    await api.agent("claude")
    await api.agent("codex")
    for name in ("ana", "bob", "carl", "dan"):
        await api.user(name)
    await api.user("root", is_admin=True)
    r = await api.send("ana", ["claude@/srv/shop.new"], cc=["carl@/srv/shop"], subject="deploy")
    ana_sid = r.json()["session_id"]
    r = await api.send("bob", ["claude@/srv/blog.new"], subject="blog")
    bob_sid = r.json()["session_id"]

    async def ask(sid: str, command: str) -> Any:
        body = {"session_id": sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
                "tool_input": {"command": command}}  # fmt: skip
        return await api.http.post(
            "/api/v1/agent/permissions", json=body, headers=api.auth("claude")
        )

    async def decide(who: str, rid: str, **body: Any) -> None:
        r = await api.http.post(
            f"/api/v1/permissions/{rid}/decision", json=body, headers=api.auth(who)
        )
        assert r.status_code == 200, r.text

    await decide("ana", (await ask(ana_sid, "make test")).json()["id"], decision="approve")
    await decide("ana", (await ask(ana_sid, "rm -rf /")).json()["id"], decision="deny", note="no")
    await decide("bob", (await ask(bob_sid, "hugo build")).json()["id"], decision="approve")
    r = await api.http.patch(
        f"/api/v1/sessions/{ana_sid}", json={"permission_mode": "full"}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    assert (await ask(ana_sid, "make deploy")).status_code == 409
    return {"ana": ana_sid, "bob": bob_sid}


async def listed(api: Api, who: str | None, **params: Any) -> Any:
    headers = api.auth(who) if who is not None else {}
    return await api.http.get("/api/v1/audit", params=params, headers=headers)


def outcomes(r: Any) -> list[tuple[str, str | None]]:
    assert r.status_code == 200, r.text
    return [(i["outcome"], i["summary"]) for i in r.json()["items"]]


async def test_who_sees_what(api: Api, day: dict[str, Any]) -> None:
    """Each reader sees the rows of the sessions they may read, newest first;
    the input's summary only where they decide; agents read none."""
    ana = [("mode_allows", "make deploy"), ("denied", "rm -rf /"), ("approved", "make test")]
    assert outcomes(await listed(api, "ana")) == ana
    assert outcomes(await listed(api, "bob")) == [("approved", "hugo build")]
    hidden = [(outcome, None) for outcome, _ in ana]
    assert outcomes(await listed(api, "carl")) == hidden  # cc'd: reads, decides nothing
    assert outcomes(await listed(api, "dan")) == []
    everything = await listed(api, "root")  # admin: all rows, no input (no decider)
    assert outcomes(everything) == [hidden[0], ("approved", None), hidden[1], hidden[2]]
    assert (await listed(api, None)).status_code == 401
    for agent in ("claude", "codex"):
        r = await listed(api, agent)
        assert r.status_code == 403, r.text
    r = await listed(api, "root", session_id=day["bob"])
    assert outcomes(r) == [("approved", None)]


async def test_an_item_names_who_decided_and_how(api: Api, day: dict[str, Any]) -> None:
    r = await listed(api, "ana")
    mode, denied, approved = r.json()["items"]
    assert mode["decided_by"] == {
        "kind": "mode",
        "name": "full",
        "channel": "system",
        "device": None,
    }
    assert mode["request_id"] is None and mode["waited_ms"] == 0
    assert denied["decided_by"] == {
        "kind": "person",
        "name": "ana",
        "channel": "api",
        "device": None,
    }
    assert denied["reason"] == "no"
    assert (approved["agent"], approved["tool_name"], approved["session_id"]) == (
        "claude", "Bash", day["ana"],
    )  # fmt: skip
    assert approved["permission_mode"] == "workspace" and mode["permission_mode"] == "full"
    assert approved["enforcement"] == "advisory"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", approved["decided_at"])
    assert approved["asked_at"] <= approved["decided_at"]


async def test_filters_pages_and_limits(api: Api, day: dict[str, Any]) -> None:
    assert outcomes(await listed(api, "root", person="bob")) == [("approved", None)]
    assert outcomes(await listed(api, "root", person="carl")) == []
    assert [o for o, _ in outcomes(await listed(api, "ana", outcome="denied"))] == ["denied"]
    assert len(outcomes(await listed(api, "root", agent="claude"))) == 4
    assert outcomes(await listed(api, "root", agent="codex")) == []
    later = rfc3339(utcnow() + timedelta(minutes=1))
    assert outcomes(await listed(api, "root", since=later)) == []
    earlier = rfc3339(utcnow() - timedelta(minutes=10))
    assert len(outcomes(await listed(api, "root", since=earlier))) == 4
    # Pages of one, following next_cursor: every row once, newest first, then null.
    seen, cursor = [], None
    for _ in range(5):
        r = await listed(api, "root", limit=1, **({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        seen += [i["id"] for i in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 4 and seen == sorted(seen, reverse=True), seen
    for params, field in (
        ({"outcome": "maybe"}, "outcome"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-03T09:00:00"}, "since"),  # no offset
        ({"cursor": "-1"}, "cursor"),
        ({"cursor": "x"}, "cursor"),
        ({"limit": 501}, "limit"),
        ({"limit": 0}, "limit"),
        ({"agent": "a" * 201}, "agent"),
    ):
        r = await listed(api, "ana", **params)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["error"]["field"] == field, (params, r.text)


async def _rows(api: Api) -> list[tuple[Any, ...]]:
    cols = [c for c in AuditRow.__table__.columns]
    async with gateway_of(api).read() as s:
        got = await s.execute(select(*cols).order_by(AuditRow.id))
        return [tuple(row) for row in got.all()]


SKIPPED = {("GET", "/api/v1/events"), ("GET", "/api/v1/agent/events")}  # streams: never end


async def test_no_route_changes_or_deletes_a_row_from_any_side(
    api: Api, day: dict[str, Any]
) -> None:
    """Every path of the API (its OpenAPI document) with every method it has,
    and PUT/PATCH/DELETE/POST on the audit's own path and `/audit/{id}`, each
    path parameter set to an audit row's id (and its request's id), as
    anonymous, the agent, another agent, the owner, another human and an admin:
    the rows are exactly as they were (and no new one appeared)."""
    before = await _rows(api)
    assert len(before) == 4
    row_id, request_id = str(before[0][0]), str(before[0][3])
    spec = (await api.http.get("/api/v1/openapi.json")).json()
    tries: list[tuple[str, str]] = []
    for path, methods in spec["paths"].items():
        for method in methods:
            if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                tries.append((method.upper(), path))
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        tries += [(method, "/api/v1/audit"), (method, "/api/v1/audit/{id}")]
    assert ("GET", "/api/v1/audit") in tries
    sides: list[str | None] = [None, "claude", "codex", "ana", "dan", "root"]
    statuses: dict[int, int] = {}
    for method, path in tries:
        if (method, path) in SKIPPED or "logout" in path:
            continue
        for ident in (row_id, request_id):
            url = re.sub(r"\{[^}]+\}", ident, path)
            for who in sides:
                headers = api.auth(who) if who is not None else {}
                body: dict[str, Any] | None = None if method in ("GET", "DELETE") else {}
                r = await api.http.request(method, url, json=body, headers=headers)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                assert r.status_code < 500, (method, url, who, r.text)
    assert await _rows(api) == before
    assert len(tries) > 80 and statuses.get(405, 0) > 0 and statuses.get(401, 0) > 0, statuses
    # Every side still reached the routes with its own credential.
    for who in ("ana", "root"):
        assert (await listed(api, who)).status_code == 200
