"""The audit trail is written at every decision point (services/audit.py,
docs/audit.md): a person's decision through the API and the command line, a
grant's, a rule's (as the rules write theirs: `decided_by = "rule:<id>"` through
create_request), the mode's 409s and the sandbox's, a timeout, a withdrawal by
the terminal, archiving — each in the decision's own transaction (a decision
rolled back leaves no row), and the database refuses to change or delete a row.
In-process gateway on a real SQLite file and on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError

from mailui4agents.db.audit_tables import AuditRow
from mailui4agents.db.base import new_id
from mailui4agents.db.tables import PermissionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import Conflict
from mailui4agents.domain.results import Opened, Refused
from mailui4agents.services import audit, permission_requests, permissions
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


@snapshot
async def world(api: Api) -> dict[str, Any]:
    """ana owns a session of agent `claude`; bob decides there too; carl is cc'd."""
    await api.agent("claude")
    for name in ("ana", "bob", "carl"):
        await api.user(name)
    r = await api.send("ana", ["claude@/srv/shop.new"], cc=["carl@/srv/shop"], subject="deploy")
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code in (200, 201), r.text
    return {"sid": sid}


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def trail(api: Api) -> list[AuditRow]:
    async with gateway_of(api).read() as s:
        return list((await s.scalars(select(AuditRow).order_by(AuditRow.id))).all())


async def ask(api: Api, sid: str, command: str = "make deploy", **extra: Any) -> Any:
    body = {"session_id": sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
            "tool_input": {"command": command}, **extra}  # fmt: skip
    return await api.http.post("/api/v1/agent/permissions", json=body, headers=api.auth("claude"))


async def asked(api: Api, sid: str, **extra: Any) -> dict[str, Any]:
    r = await ask(api, sid, **extra)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def decide(
    api: Api, who: str, rid: str, headers: dict[str, str] | None = None, **body: Any
) -> httpx.Response:
    return await api.http.post(
        f"/api/v1/permissions/{rid}/decision",
        json=body,
        headers={**api.auth(who), **(headers or {})},
    )


def row_of(rows: list[AuditRow], rid: str) -> AuditRow:
    [row] = [r for r in rows if r.request_id == rid]
    return row


async def test_a_person_deciding_through_the_api_and_the_cli_is_one_row_each(
    api: Api, world: dict[str, Any]
) -> None:
    sid = world["sid"]
    one = await asked(api, sid, tool_input={"command": f"curl -H 'Authorization: Bearer {SECRET}'"})
    two = await asked(api, sid, command="rm -rf build")
    assert await trail(api) == []  # asking is no decision
    assert (await decide(api, "ana", one["id"], decision="approve")).status_code == 200
    cli = {"X-Agentmail-Channel": "cli"}
    r = await decide(api, "bob", two["id"], cli, decision="deny", note="not today")
    assert r.status_code == 200, r.text
    rows = await trail(api)
    assert len(rows) == 2
    a, b = row_of(rows, one["id"]), row_of(rows, two["id"])
    assert (a.outcome, a.actor_kind, a.actor, a.channel, a.device) == (
        "approved", "person", "ana", "api", None,
    )  # fmt: skip
    assert (b.outcome, b.actor_kind, b.actor, b.channel, b.reason) == (
        "denied", "person", "bob", "cli", "not today",
    )  # fmt: skip
    for row, req in ((a, one), (b, two)):
        assert (row.session_id, row.agent_name, row.tool_name, row.kind) == (
            sid, "claude", "Bash", "approval",
        )  # fmt: skip
        assert (row.permission_mode, row.enforcement) == ("workspace", "advisory")
        assert row.asked_at.isoformat().startswith(req["created_at"][:19])
        assert 0 <= row.waited_ms == int((row.at - row.asked_at).total_seconds() * 1000)
    assert b.summary == "rm -rf build"
    assert a.summary is not None and SECRET not in a.summary and "***" in a.summary
    # A second decision is refused and writes nothing.
    assert (await decide(api, "bob", one["id"], decision="deny")).status_code == 409
    assert len(await trail(api)) == 2


async def test_a_grant_and_a_question_and_a_timeout(api: Api, world: dict[str, Any]) -> None:
    sid = world["sid"]
    first = await asked(api, sid, command="make test")
    r = await decide(api, "ana", first["id"], decision="approve", always=True)
    assert r.status_code == 200, r.text
    grant_id = r.json()["grant_id"]
    again = await asked(api, sid, command="make test")
    assert again["status"] == "approved"
    q = await asked(
        api, sid, kind="question", question="Which region?", tool_name=None, tool_input=None,
        options=[{"label": "eu"}, {"label": "us"}],
    )  # fmt: skip
    assert (
        await decide(api, "bob", q["id"], decision="approve", answers=["eu"])
    ).status_code == 200
    late = await asked(api, sid, command="make late")
    async with gateway_of(api).write() as s:  # its deadline passes
        past = utcnow() - timedelta(seconds=5)
        await s.execute(
            update(PermissionRow).where(PermissionRow.id == late["id"]).values(expires_at=past)
        )
    listed = await api.http.get("/api/v1/permissions", headers=api.auth("ana"))
    assert listed.status_code == 200  # a list expires what is past its deadline first
    rows = await trail(api)
    g = row_of(rows, again["id"])
    assert (g.outcome, g.actor_kind, g.actor, g.channel, g.waited_ms) == (
        "approved", "grant", grant_id, "grant", 0,
    )  # fmt: skip
    a = row_of(rows, q["id"])
    assert (a.kind, a.outcome, a.actor, a.summary, a.tool_name) == (
        "question", "answered", "bob", "Which region?", None,
    )  # fmt: skip
    t = row_of(rows, late["id"])
    assert (t.outcome, t.actor_kind, t.actor, t.channel) == ("expired", "timeout", None, "system")
    assert t.reason == "nobody decided before the request's deadline"
    assert len(rows) == 4  # the first approval, the grant's, the answer, the timeout


async def test_the_terminal_withdrawing_and_archiving(api: Api, world: dict[str, Any]) -> None:
    sid = world["sid"]
    mine = await asked(api, sid, relay_key="race:0123456789abcdef:a1")
    left = await asked(api, sid, command="make rest")
    r = await api.http.post(
        "/api/v1/agent/permissions/withdraw",
        json={"relay_key_prefix": "race:0123456789abcdef:"},
        headers=api.auth("claude"),
    )
    assert r.json() == {"withdrawn": [mine["id"]]}
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"archived": True}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    rows = await trail(api)
    w, c = row_of(rows, mine["id"]), row_of(rows, left["id"])
    assert (w.outcome, w.actor_kind, w.actor, w.channel) == (
        "withdrawn", "terminal", "claude", "terminal",
    )  # fmt: skip
    assert (c.outcome, c.actor_kind, c.actor, c.reason) == (
        "cancelled", "person", "ana", "the session was archived",
    )  # fmt: skip
    # Asking in the archived session is refused: recorded as the gateway's answer.
    assert (await ask(api, sid)).status_code == 409
    [refused] = [r for r in await trail(api) if r.request_id is None]
    assert (refused.outcome, refused.actor_kind) == ("archived", "system")


@pytest.mark.parametrize(("mode", "outcome"), [("full", "mode_allows"), ("plan", "mode_forbids")])
async def test_the_modes_answers_are_recorded_without_a_request(
    api: Api, world: dict[str, Any], mode: str, outcome: str
) -> None:
    sid = world["sid"]
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"permission_mode": mode}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    r = await ask(api, sid, tool_input={"command": "deploy", "password": SECRET})
    assert r.status_code == 409 and r.json()["error"]["reason"] == outcome, r.text
    [row] = await trail(api)
    assert (row.request_id, row.outcome, row.actor_kind, row.actor, row.channel) == (
        None, outcome, "mode", mode, "system",
    )  # fmt: skip
    assert (row.permission_mode, row.waited_ms, row.agent_name, row.tool_name) == (
        mode, 0, "claude", "Bash",
    )  # fmt: skip
    assert row.summary == "deploy"
    assert row.reason == r.json()["error"]["message"]
    async with gateway_of(api).read() as s:  # still no request
        assert (await s.scalars(select(PermissionRow))).all() == []


async def open_decided(gw: Gateway, sid: str, decided_by: str, status: str, note: str) -> Opened:
    """What the rules write in create_request (docs/audit.md): the request
    inserted already decided with `decided_by = "rule:<id>"`, through the one
    insert create_request uses, returned as Opened — wrapped by audit.audited as
    create_request is."""

    async def open_request(s: Any, agent: Principal, **ask: Any) -> Opened:
        now = utcnow()
        row = PermissionRow(
            id=new_id(), session_id=ask["session_id"], agent_name=agent.name, kind="approval",
            tool_name="Bash", tool_input={"command": "git push --force"}, summary=None,
            question=None, options=None, multi_select=False, relay_key=uuid.uuid4().hex,
            status=status, decision="deny" if status == "denied" else "approve", note=note,
            answers=None, decided_by=decided_by, decided_at=now,
            expires_at=now + timedelta(seconds=600), mail_id=None, grant_id=None,
            created_at=now, decided_channel="rule", decided_device=None,
        )  # fmt: skip
        assert await permission_requests._insert(s, row)
        return Opened(permissions.permission_out(row))

    agent = Principal("agent", "x", "claude")
    async with gw.write() as s:
        got = await audit.audited(open_request)(s, agent, session_id=sid, kind="approval")
    assert isinstance(got, Opened)
    return got


async def test_a_rules_decision_lands_as_that_rule(api: Api, world: dict[str, Any]) -> None:
    """Any "kind:id" decided_by lands as that actor kind and id, with no code
    for it: a deny rule and an allow rule."""
    sid = world["sid"]
    why = "rule r-7: never git push --force"
    denied = await open_decided(gateway_of(api), sid, "rule:r-7", "denied", why)
    allowed = await open_decided(gateway_of(api), sid, "rule:r-8", "approved", "")
    rows = await trail(api)
    d, a = row_of(rows, denied.request.id), row_of(rows, allowed.request.id)
    assert (d.outcome, d.actor_kind, d.actor, d.channel, d.reason) == (
        "denied", "rule", "r-7", "rule", why,
    )  # fmt: skip
    assert (a.outcome, a.actor_kind, a.actor) == ("approved", "rule", "r-8")
    assert d.summary == "git push --force"


async def test_a_proven_sandbox_answer_lands_as_the_sandbox(
    api: Api, world: dict[str, Any]
) -> None:
    """The sandbox's 409 (`mode_allows` with `allowed_by: "sandbox"`), raised in
    create_request as the mode's is: recorded, committed, answered."""

    async def open_request(s: Any, agent: Principal, **ask: Any) -> Opened:
        raise Conflict("a proven sandbox", reason="mode_allows", allowed_by="sandbox",
                       permission_mode="workspace")  # fmt: skip

    agent = Principal("agent", "x", "claude")
    async with gateway_of(api).write() as s:
        got = await audit.audited(open_request)(
            s, agent, session_id=world["sid"], kind="approval", tool_name="Edit",
            tool_input={"file_path": "/srv/shop/a.py"}, summary=None, question=None,
        )  # fmt: skip
    assert isinstance(got, Refused) and got.error.extra["allowed_by"] == "sandbox"
    [row] = await trail(api)
    assert (row.outcome, row.actor_kind, row.actor, row.summary) == (
        "mode_allows", "sandbox", None, "/srv/shop/a.py",
    )  # fmt: skip


async def test_a_decision_rolled_back_leaves_no_row(
    api: Api, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision's receipt fails after the audit INSERT: the whole decision
    rolls back, the row with it; then the same decision succeeds, one row."""
    req = await asked(api, world["sid"])

    async def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("the receipt could not be written")

    monkeypatch.setattr(permissions, "announce", broken)
    with pytest.raises(RuntimeError):
        await decide(api, "ana", req["id"], decision="approve")
    assert await trail(api) == []
    r = await api.http.get(f"/api/v1/agent/permissions/{req['id']}", headers=api.auth("claude"))
    assert r.json()["status"] == "pending"
    monkeypatch.undo()
    assert (await decide(api, "ana", req["id"], decision="approve")).status_code == 200
    assert [r.outcome for r in await trail(api)] == ["approved"]


async def test_the_database_refuses_to_change_or_delete_a_row(
    api: Api, world: dict[str, Any]
) -> None:
    """The triggers of migration 0022, on each backend: UPDATE and DELETE abort
    (and TRUNCATE on PostgreSQL); the row is as it was."""
    req = await asked(api, world["sid"])
    assert (await decide(api, "ana", req["id"], decision="deny")).status_code == 200
    [before] = await trail(api)
    gw = gateway_of(api)
    statements = [
        "UPDATE audit_decisions SET outcome = 'approved'",
        "DELETE FROM audit_decisions",
    ]
    if not gw.db.is_sqlite:
        statements.append("TRUNCATE audit_decisions")
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"):
            async with gw.write() as s:
                await s.execute(text(statement))
    [after] = await trail(api)
    assert (after.id, after.outcome, after.actor, after.at) == (
        before.id, "denied", "ana", before.at,
    )  # fmt: skip


async def test_nobody_who_could_decide_is_recorded_as_the_gateways_refusal(
    api: Api, world: dict[str, Any]
) -> None:
    """A session of agents alone: 409 `no_human`, recorded without a request."""
    await api.agent("pi")
    mine = (await api.send("ana", ["pi@/srv/x.new"], subject="work")).json()
    m = await api.send(
        "pi", ["claude@/srv/x.new"], subject="agents only", from_session_id=mine["session_id"]
    )
    r = await ask(api, m.json()["session_id"], command="make agents")
    assert r.status_code == 409 and r.json()["error"]["reason"] == "no_human", r.text
    [row] = await trail(api)
    assert (row.outcome, row.actor_kind, row.actor, row.request_id, row.summary) == (
        "no_human", "system", None, None, "make agents",
    )  # fmt: skip
    assert row.session_id == m.json()["session_id"] and row.reason == r.json()["error"]["message"]


def test_the_summary_masks_what_it_shows_and_never_a_secret_keys_value() -> None:
    """summary_of masks only the value it shows when that value's key names no
    secret (domain/masking.is_secret_key): true of every key it picks."""
    from mailui4agents.domain.masking import is_secret_key

    assert not [key for key in audit._PREVIEW_KEYS if is_secret_key(key)]
    cmd = f"curl -H 'Authorization: Bearer {SECRET}' https://x"
    assert audit.summary_of("approval", None, {"command": cmd}, None) == (
        "curl -H 'Authorization: ***' https://x"
    )
    got = audit.summary_of("approval", None, {"x": 1, "api_token": SECRET}, None)
    assert got == '{"x":1,"api_token":"***"}'
    long = audit.summary_of("approval", None, {"command": "a " * 500}, None)
    assert long is not None and len(long) == audit.SUMMARY_CHARS and long.endswith("…")
