"""What one send costs the database: SQL statements per mail, counted with a
SQLAlchemy event listener on the engines of an in-process gateway (not timed;
the timings are in bench/delivery.py), on SQLite and on PostgreSQL.

SQLite has a writer engine and a reader engine; PostgreSQL has one pool for
both (db/engine.py), so there the reads and the writes of a request are one
list — once counted as two, every statement appeared twice, the writer's
`FROM agents` look-up among the reads (docs/postgres.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiosqlite
import httpx
import pytest
from sqlalchemy import event

from mailui4agents.app import create_app
from mailui4agents.events.hub import EventHub
from mailui4agents.settings import Settings
from tests.conftest import ADMIN_PASSWORD, Api

pytestmark = pytest.mark.anyio


@dataclass
class Statements:
    """The statements run for the test's own requests, writer and reader apart:
    only those of the task that last called clear(), so the gateway's
    background work (scheduler sweeps, the hub's reads) is not counted.
    httpx's ASGI transport runs the app in the calling task."""

    writer: list[str] = field(default_factory=list)
    reader: list[str] = field(default_factory=list)  # empty when one_pool
    one_pool: bool = False  # PostgreSQL: reads and writes share an engine, all in `writer`
    task: asyncio.Task[Any] | None = None

    def all(self) -> list[str]:
        return self.reader + self.writer

    def clear(self) -> None:
        self.writer.clear()
        self.reader.clear()
        self.task = asyncio.current_task()

    def ours(self) -> bool:
        try:
            return asyncio.current_task() is self.task
        except RuntimeError:  # no running loop (a pool thread)
            return False


@dataclass
class Served:
    api: Api
    statements: Statements
    hub: EventHub


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[Served]:
    app = create_app(settings)
    statements = Statements()
    async with app.router.lifespan_context(app):
        db = app.state.gateway.db
        statements.one_pool = db.reader is db.writer
        engines = [(db.writer, statements.writer)]
        if not statements.one_pool:  # one listener per engine: each statement once
            engines.append((db.reader, statements.reader))
        listeners: list[tuple[Any, Any]] = []
        for engine, out in engines:

            def record(_c: Any, _cur: Any, statement: str, *_: Any, out: list[str] = out) -> None:
                if statements.ours():
                    out.append(" ".join(statement.split()))

            event.listen(engine.sync_engine, "before_cursor_execute", record)
            listeners.append((engine.sync_engine, record))
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                api = Api(http)
                await api.login("admin", ADMIN_PASSWORD)
                yield Served(api, statements, app.state.gateway.hub)
        finally:
            for engine, fn in listeners:
                event.remove(engine, "before_cursor_execute", fn)


async def _send_counts(served: Served, recipients: int) -> tuple[list[str], list[str]]:
    api = served.api
    await api.user("ana")
    names = [f"bot{i}" for i in range(recipients)]
    for name in names:
        await api.agent(name)
    to = [f"{n}@/srv/shop" for n in names]
    first = await api.send("ana", [f"{names[0]}@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    warm = await api.send("ana", to, subject="warm", parent_mail_id=first.json()["id"])
    assert warm.status_code == 201, warm.text
    served.statements.clear()
    r = await api.send("ana", to, subject="counted", parent_mail_id=warm.json()["id"])
    assert r.status_code == 201, r.text
    return list(served.statements.writer), list(served.statements.reader)


def _queries(statements: list[str]) -> list[str]:
    return [q for q in statements if not q.startswith(("BEGIN", "COMMIT", "ROLLBACK"))]


def _shapes(statements: list[str]) -> list[str]:
    """The verb of each query, or the function a `SELECT pg_…(` calls."""
    return [
        q.split()[1].split("(")[0] if q.startswith("SELECT pg_") else q.split()[0]
        for q in _queries(statements)
    ]


# Reads of the token per request on SQLite once it was used: none, its principal
# is cached (services/identity.py, `authenticate_in`); it was one. PostgreSQL
# reads it every time (first, on its one pool).
TOKEN_READS = 0

DELIVER_WRITES = ["SELECT", "INSERT", "INSERT", "UPDATE", "INSERT"]
# A reply of a person to an agent also reads the agent's policy (services/tasking.py).
SEND_WRITES = ["SELECT", "SELECT", *DELIVER_WRITES[1:]]


def _on_postgresql(writes: list[str]) -> list[str]:
    """The same writes as PostgreSQL lists them: the token read first (one pool),
    and the event log's advisory lock (ids in commit order) with the NOTIFY that
    wakes the other replicas, in one statement, before the events INSERT
    (docs/postgres.md)."""
    return ["SELECT", *writes[:-1], "pg_advisory_xact_lock", writes[-1]]


@pytest.mark.parametrize("recipients", [1, 20])
async def test_a_reply_costs_five_writes_and_one_read_whatever_the_recipients(
    served: Served, recipients: int
) -> None:
    """Per send, on the writer: the parent mail's session with the sender's
    membership (one query), the policies of the agents it sets to work with the
    sender's roles (one query, services/tasking.py: read in the write, so a
    tasker removed a moment before is not let through), the mail, its
    recipients (one INSERT), the session's
    last_mail_at, its events (one INSERT). On a reader: the token, once (then
    cached: TOKEN_READS). Recipients'
    kinds come from memory once seen (names never change kind:
    services/identity.kinds_of). It was 8 + 3, then 6 + 1 (the membership a
    query of its own); PostgreSQL 1 + 6 + 2, then 1 + 5 + 1."""
    writer, reader = await _send_counts(served, recipients)
    if served.statements.one_pool:
        assert _shapes(writer) == _on_postgresql(SEND_WRITES), "\n".join(writer)
        assert "user_tokens" in _queries(writer)[0]  # the token, then the send
        return
    assert _shapes(writer) == SEND_WRITES, "\n".join(writer)
    assert len(_queries(reader)) == TOKEN_READS, "\n".join(reader)


@pytest.mark.parametrize("recipients", [1, 20])
async def test_with_a_stream_open_the_events_insert_returns_their_ids_in_the_same_statement(
    served: Served, recipients: int
) -> None:
    """A stream is open: the events' INSERT returns their ids for the hub's
    hand-off (events/log.py, `append_rows`) and the send costs the same
    statements (without one, it returns nothing: the test above)."""
    sub = await served.hub.subscribe("agent:bot0")
    try:
        writer, reader = await _send_counts(served, recipients)
    finally:
        served.hub.unsubscribe(sub)
    events_insert = _queries(writer)[-1]
    assert events_insert.startswith("INSERT INTO events") and "RETURNING" in events_insert
    if served.statements.one_pool:
        assert _shapes(writer) == _on_postgresql(SEND_WRITES), "\n".join(writer)
        return
    assert _shapes(writer) == SEND_WRITES, "\n".join(writer)
    assert len(_queries(reader)) == TOKEN_READS, "\n".join(reader)


async def test_a_name_not_found_is_looked_up_again(served: Served) -> None:
    """Only found names are remembered: a recipient refused as unknown can be
    created and then mailed (negative control for the kinds cache)."""
    api = served.api
    await api.user("ana")
    r = await api.send("ana", ["later@/srv/shop.new"])
    assert r.status_code == 400 and r.json()["error"]["field"] == "to[0]", r.text
    await api.agent("later")
    r = await api.send("ana", ["later@/srv/shop.new"])
    assert r.status_code == 201, r.text
    # Once seen, a name is not looked up again: no kinds_of query (agents UNION
    # ALL users). The writer's own `FROM agents` (mode_enforcement) is another.
    served.statements.clear()
    r = await api.send("ana", ["later@/srv/shop.new"])
    assert r.status_code == 201, r.text
    assert not [q for q in served.statements.all() if "UNION ALL" in q and "FROM agents" in q]


async def _list_sessions(served: Served, token: str) -> tuple[list[dict[str, Any]], int]:
    served.statements.clear()
    r = await served.api.http.get(
        "/api/v1/sessions", params={"limit": 100}, headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200, r.text
    return r.json()["items"], len(_queries(served.statements.all()))


async def test_a_session_list_costs_the_same_queries_for_2_or_8_sessions(served: Served) -> None:
    api = served.api
    await api.user("ana")
    key = await api.agent("bot")
    counts = []
    made: list[str] = []
    for total in (2, 8):
        while len(made) < total:
            i = len(made)
            r = await api.send("ana", [f"bot@/srv/w{i}.new"], subject=f"s{i}")
            assert r.status_code == 201, r.text
            made.append(r.json()["session_id"])
            if i % 2:  # the agent answers in every other session: unread for ana
                reply = await api.http.post(
                    "/api/v1/agent/mail",
                    json={"to": [f"ana@/srv/w{i}"], "subject": "re", "body": "b",
                          "parent_mail_id": r.json()["id"]},
                    headers={"Authorization": f"Bearer {key}"},
                )  # fmt: skip
                assert reply.status_code == 201, reply.text
        perm = await api.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": made[-1], "tool_name": "Bash",
                  "tool_input": {"command": f"echo {total}"}, "relay_key": f"k{total}"},
            headers={"Authorization": f"Bearer {key}"},
        )  # fmt: skip
        assert perm.status_code == 201, perm.text
        items, queries = await _list_sessions(served, api.tokens["ana"])
        counts.append(queries)
        by_id = {item["id"]: item for item in items}
        assert set(by_id) == set(made)
        for i, sid in enumerate(made):
            item = by_id[sid]
            assert item["participants"] == ["ana", "bot"], item
            pending = 1 if sid in (made[1], made[-1]) else 0
            assert item["pending_permissions"] == pending, (i, item)
            # The agent's answer and a request's own mail are unread for ana.
            assert item["unread"] == i % 2 + pending, (i, item)
            assert item["deciders"] == ["ana"], item
    assert counts[0] == counts[1], counts  # not one more query per row
    # The page, four describe queries, and on PostgreSQL the token (SQLite: cached).
    assert counts[1] <= (6 if served.statements.one_pool else 5), counts


async def _asked_and_decided(served: Served, always: bool = False) -> tuple[Statements, Statements]:
    """The statements of one permission request, then of approving it, in a
    session with a reply, after one warm-up of each."""
    api = served.api
    await api.user("ana")
    key = await api.agent("bot")
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    agent = {"Authorization": f"Bearer {key}"}
    for i in range(2):
        served.statements.clear()
        r = await api.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": first.json()["session_id"], "tool_name": "Bash",
                  "tool_input": {"command": f"make test{i}"}, "relay_key": f"k{i}"},
            headers=agent,
        )  # fmt: skip
        assert r.status_code == 201, r.text
        asked = _copy(served.statements)
        served.statements.clear()
        d = await api.http.post(
            f"/api/v1/permissions/{r.json()['id']}/decision",
            json={"decision": "approve", "always": always and i == 1},
            headers=api.auth("ana"),
        )
        assert d.status_code == 200, d.text
        decided = _copy(served.statements)
    return asked, decided


def _copy(statements: Statements) -> Statements:
    return Statements(list(statements.writer), list(statements.reader), statements.one_pool)


def _check(statements: Statements, writes: list[str]) -> None:
    writer, reader = statements.writer, statements.reader
    if statements.one_pool:
        assert _shapes(writer) == _on_postgresql(writes), "\n".join(writer)
        assert "agent_keys" in _queries(writer)[0] or "user_tokens" in _queries(writer)[0]
        return
    assert _shapes(writer) == writes, "\n".join(writer)
    assert len(_queries(reader)) == TOKEN_READS, "\n".join(reader)  # the token


# The session with the agent's membership, its earlier request with this relay
# key, whether it has grants for the tool, and the deciders (one query); the
# request (ON CONFLICT DO NOTHING, no savepoint, its mail's id in it); then
# delivery as a send's.
ASK_WRITES = ["SELECT", "INSERT", *DELIVER_WRITES[1:]]
# The request with its session, the human's membership, whether anything there
# is past its deadline and the deciders (one query); the decision (one UPDATE);
# its audit row (one INSERT, services/audit.py); then the receipt's delivery,
# the decision events in its events INSERT.
DECIDE_WRITES = ["SELECT", "UPDATE", "INSERT", *DELIVER_WRITES[1:]]


async def test_a_permission_request_costs_six_writes(served: Served) -> None:
    """It was 14 on SQLite (session, membership, relay key, grants, deciders, a
    savepoint around the insert, the mail's id set by a second UPDATE, two events
    INSERTs), 1 + 16 on PostgreSQL."""
    asked, _ = await _asked_and_decided(served)
    _check(asked, ASK_WRITES)


async def test_a_decision_costs_seven_writes(served: Served) -> None:
    """It was 14 on SQLite (the request, its session, membership, the decider
    check, the expiry look-up, a conditional UPDATE then the ORM's second one,
    the deciders again, one INSERT per decision event), 1 + 15 on PostgreSQL;
    six before the audit row."""
    _, decided = await _asked_and_decided(served)
    _check(decided, DECIDE_WRITES)


async def test_an_approval_with_always_adds_only_the_grant(served: Served) -> None:
    _, decided = await _asked_and_decided(served, always=True)
    _check(decided, ["SELECT", "INSERT", *DECIDE_WRITES[1:]])


async def test_a_request_a_grant_allows_reads_the_grants_and_delivers_nothing(
    served: Served,
) -> None:
    """With a grant for the tool the grants are read (the second SELECT) and the
    request is approved at once: the request, its decision event and its audit
    row, no mail."""
    api = served.api
    await _asked_and_decided(served, always=True)  # ana granted `make test1` for good
    sid = (await api.http.get("/api/v1/sessions", headers=api.auth("ana"))).json()["items"][0]
    served.statements.clear()
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid["id"], "tool_name": "Bash",
              "tool_input": {"command": "make test1"}, "relay_key": "granted"},
        headers=api.auth("bot"),
    )  # fmt: skip
    assert r.status_code == 201 and r.json()["status"] == "approved", r.text
    counted = _copy(served.statements)
    if counted.one_pool:  # the audit row comes after the events (services/audit.audited)
        pg = ["SELECT", "SELECT", "SELECT", "INSERT", "pg_advisory_xact_lock", "INSERT", "INSERT"]
        assert _shapes(counted.writer) == pg, "\n".join(counted.writer)
    else:
        _check(counted, ["SELECT", "SELECT", "INSERT", "INSERT", "INSERT"])
    assert "audit_decisions" in _queries(counted.writer)[-1]


@pytest.mark.parametrize("mode", ["full", "plan"])
async def test_an_answer_of_the_mode_costs_one_read_and_its_audit_row(
    served: Served, mode: str
) -> None:
    """Full and plan mode answer 409 without a request: the session (one query),
    then the audit row (one INSERT, with the session's mode and enforcement as
    subqueries: no read before it), committed — before the audit trail the same
    transaction read and rolled back."""
    api = served.api
    await api.user("ana")
    key = await api.agent("bot")
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    sid = first.json()["session_id"]
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"permission_mode": mode}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    for i in range(2):  # the second one counted
        served.statements.clear()
        r = await api.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": sid, "tool_name": "Bash",
                  "tool_input": {"command": f"make test{i}"}, "relay_key": f"m{i}"},
            headers={"Authorization": f"Bearer {key}"},
        )  # fmt: skip
        assert r.status_code == 409, r.text
    writer = served.statements.writer
    if served.statements.one_pool:
        assert _shapes(writer) == ["SELECT", "SELECT", "INSERT"], "\n".join(writer)
    else:
        assert _shapes(writer) == ["SELECT", "INSERT"], "\n".join(writer)
    assert "audit_decisions" in _queries(writer)[-1]


async def _listing_counts(
    served: Served, path: str, token: str, params: dict[str, Any]
) -> tuple[list[str], list[str]]:
    served.statements.clear()
    r = await served.api.http.get(path, params=params, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.json()["items"], r.text
    return list(served.statements.writer), list(served.statements.reader)


# A page of mail on the writer (services/reading.page_of): its mails with their
# sessions and, in a column of each row, their recipients (one SELECT), the
# read log (one INSERT … SELECT); a SELECT more for the attachments of the
# mails that have some; a thread first looks its anchor up with the read rule
# in it, an inbox that marks read adds the one UPDATE. On main at 28ad0d2 a page
# was 4 SELECTs + the INSERT (mails, sessions, recipients, attachments, ORM
# objects); a thread 10 (the anchor with its three look-ups and the membership
# test before the page's five); marking read 6 + one UPDATE per marked row (the
# ORM flushed the read_at it had set on each loaded recipient again). A search
# page is a page too (services/search.py); it was 4 SELECTs + the INSERT at 47ad0e4.
LISTINGS = {
    "mailbox": ("/api/v1/mailbox", "ana", {}, ["SELECT", "INSERT"]),
    "inbox": ("/api/v1/agent/inbox", "bot", {"status": "all"}, ["SELECT", "INSERT"]),
    "inbox, marking read": (
        "/api/v1/agent/inbox", "bot", {"mark_read": "true"}, ["SELECT", "INSERT", "UPDATE"],
    ),
    "thread": ("/api/v1/mail/{parent}/thread", "ana", {}, ["SELECT", "SELECT", "INSERT"]),
    "search": ("/api/v1/search", "ana", {"q": "re"}, ["SELECT", "INSERT"]),
}  # fmt: skip


@pytest.mark.parametrize("listing", list(LISTINGS))
async def test_a_page_of_mail_costs_the_same_statements_for_2_or_12_mails(
    served: Served, listing: str
) -> None:
    """Per page, whatever its length: the shapes above on the writer, the token
    on a reader (PostgreSQL: the token first, one pool)."""
    api = served.api
    await api.user("ana")
    key = await api.agent("bot")
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    parent = first.json()["id"]
    path, who, params, shapes = LISTINGS[listing]
    token = key if who == "bot" else api.tokens["ana"]
    counts = []
    sent = 1
    for total in (2, 12):
        while sent < total:
            r = await api.send("ana", ["bot@/srv/shop"], subject=f"m{sent}", parent_mail_id=parent)
            assert r.status_code == 201, r.text
            reply = await api.http.post(
                "/api/v1/agent/mail",
                json={"to": ["ana@/srv/shop"], "subject": "re", "body": "b",
                      "parent_mail_id": parent},
                headers={"Authorization": f"Bearer {key}"},
            )  # fmt: skip
            assert reply.status_code == 201, reply.text
            sent += 1
        writer, reader = await _listing_counts(
            served, path.format(parent=parent), token, {"limit": 50, **params}
        )
        if served.statements.one_pool:
            assert _shapes(writer)[0] == "SELECT", "\n".join(writer)  # the token
            assert _shapes(writer)[1:] == shapes, "\n".join(writer)
        else:
            assert _shapes(writer) == shapes, "\n".join(writer)
            assert len(_queries(reader)) == TOKEN_READS, "\n".join(reader)
        counts.append(len(_queries(writer)))
    assert counts[0] == counts[1], counts  # not one more statement per mail


async def test_reading_one_mail_and_marking_mail_read_cost_a_few_statements(
    served: Served,
) -> None:
    """GET a mail: the mail with its session, recipients and the read rule (one
    SELECT), the read log, the reader's UPDATE if it was unread (main at
    28ad0d2: 4 SELECTs, the INSERT, 2 UPDATEs). POST
    /agent/inbox/read: one UPDATE for 1 or 5 mails (main: 4 SELECTs + 1 UPDATE
    + one more per marked mail)."""
    api = served.api
    await api.user("ana")
    key = await api.agent("bot")
    bot = {"Authorization": f"Bearer {key}"}
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    mail_id, sid = first.json()["id"], first.json()["session_id"]
    pg = served.statements.one_pool
    for shapes in (["SELECT", "INSERT", "UPDATE"], ["SELECT", "INSERT"]):
        served.statements.clear()  # unread, then read already: no UPDATE
        r = await api.http.get(f"/api/v1/agent/mail/{mail_id}", headers=bot)
        assert r.status_code == 200, r.text
        writer = served.statements.writer
        assert (_shapes(writer)[1:] if pg else _shapes(writer)) == shapes, "\n".join(writer)
    # Scoped: the scope session with the agent's membership is one SELECT more
    # (main: two, the session and then the membership).
    served.statements.clear()
    r = await api.http.get(f"/api/v1/agent/mail/{mail_id}", params={"session_id": sid}, headers=bot)
    assert r.status_code == 200, r.text
    writer = served.statements.writer
    shapes = ["SELECT", "SELECT", "INSERT"]
    assert (_shapes(writer)[1:] if pg else _shapes(writer)) == shapes, "\n".join(writer)
    for total in (1, 5):
        for i in range(total):
            r = await api.send("ana", ["bot@/srv/shop"], subject=f"m{i}", parent_mail_id=mail_id)
            assert r.status_code == 201, r.text
        served.statements.clear()
        r = await api.http.post("/api/v1/agent/inbox/read", json={"session_id": sid}, headers=bot)
        assert r.status_code == 200 and r.json() == {"marked": total}, r.text
        writer = served.statements.writer
        assert (_shapes(writer)[1:] if pg else _shapes(writer)) == ["UPDATE"], "\n".join(writer)


async def test_attachments_are_one_select_more_and_only_when_a_mail_has_some(
    served: Served,
) -> None:
    api = served.api
    await api.user("ana")
    await api.agent("bot")
    r = await api.http.post(
        "/api/v1/attachments", files={"file": ("a.txt", b"abc", "text/plain")},
        headers=api.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    pg = served.statements.one_pool
    path = f"/api/v1/mail/{first.json()['id']}/thread"
    for files, shapes in (
        ([], ["SELECT", "SELECT", "INSERT"]),
        ([r.json()["attachment_id"]], ["SELECT", "SELECT", "SELECT", "INSERT"]),
    ):
        if files:
            sent = await api.send(
                "ana",
                ["bot@/srv/shop"],
                subject="with a file",
                parent_mail_id=first.json()["id"],
                attachment_ids=files,
            )
            assert sent.status_code == 201, sent.text
        served.statements.clear()
        page = await api.http.get(path, headers=api.auth("ana"))
        assert page.status_code == 200, page.text
        assert [len(i["attachments"]) for i in page.json()["items"]] == [0, 1][: 1 + len(files)]
        writer = served.statements.writer
        assert (_shapes(writer)[1:] if pg else _shapes(writer)) == shapes, "\n".join(writer)


async def test_an_agents_reply_to_a_person_reads_nothing_of_e_mail_without_smtp(
    served: Served,
) -> None:
    """A gateway without smtp_url adds no statement to an agent's send for the
    e-mail of agents' mails (services/email_agent_mail.py): no policy, no
    address, no outbox. Its writes are those of any reply."""
    api = served.api
    await api.user("ana")
    await api.agent("bot")
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="first")
    assert first.status_code == 201, first.text
    parent = first.json()["id"]
    for _ in range(2):  # a warm-up, then the counted one
        served.statements.clear()
        r = await api.send("bot", ["ana@/srv/shop"], subject="re", parent_mail_id=parent)
        assert r.status_code == 201, r.text
        parent = r.json()["id"]
    queries = _queries(served.statements.all())
    touched = [q for q in queries if "notify_policies" in q or "email_" in q]
    assert touched == [], "\n".join(touched)
    # The three reads of an agent's reply (its parent's session first), then
    # delivery: the same statements as before agents' mails were e-mailed.
    writes = ["SELECT", "SELECT", *SEND_WRITES[1:]]
    if served.statements.one_pool:
        assert _shapes(served.statements.writer) == _on_postgresql(writes)
    else:
        assert _shapes(served.statements.writer) == writes, "\n".join(served.statements.writer)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch, served: Served) -> list[str]:
    """Calls into aiosqlite's worker threads made by the test's own requests
    (Statements.ours), by function name: `_run` a statement, `commit`, `rollback`."""
    calls: list[str] = []
    real: Any = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kw: Any) -> Any:
        if served.statements.ours():
            calls.append(getattr(fn, "__name__", repr(fn)))
        return await real(self, fn, *args, **kw)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return calls


@pytest.mark.sqlite_only  # SQLite's driver: PostgreSQL has no worker thread
async def test_a_send_makes_no_hop_on_sqlite(served: Served, hops: list[str]) -> None:
    """Its write transaction is inline (db/sqlite_driver.py): BEGIN IMMEDIATE,
    the statements and the COMMIT run on the event loop's thread — it made seven
    hops, one per statement, then two. The token and the recipients' kinds are
    known: no read."""
    await _send_counts(served, 3)
    assert hops == [], hops


@pytest.mark.sqlite_only
async def test_a_permission_request_and_its_decision_make_no_hop_on_sqlite(
    served: Served, hops: list[str]
) -> None:
    await _asked_and_decided(served)  # a warm-up pair, then the counted pair
    # The agent key's first use reads it (then cached); the writes hop no more.
    assert hops == ["_run"], hops
