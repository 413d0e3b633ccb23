"""`agentmail db copy` (db/copy.py): a populated SQLite installation copied to
PostgreSQL keeps everything — people log in with their old tokens, agents with
their old keys, streams resume with the same event ids, attachments download —
and the acceptance scenario then runs on the copy. Copied back to SQLite, every
row equals the original."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mailui4agents.app import create_app
from mailui4agents.cli.main import main
from mailui4agents.db.engine import Database
from mailui4agents.db.schema import metadata
from mailui4agents.settings import Settings
from mailui4agents.testing_pg import PgCluster
from tests import scenarios
from tests.conftest import ADMIN_PASSWORD, Api, fast_settings
from tests.live_app import live_app
from tests.pg_fixtures import fresh_database
from tests.sse import collect

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def live_gateway(settings: Settings) -> AsyncIterator[Api]:
    """Real uvicorn (streams need real HTTP: the ASGI transport buffers them)."""
    with live_app(settings) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            yield a


@asynccontextmanager
async def gateway(settings: Settings) -> AsyncIterator[Api]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            yield a


async def populate(a: Api) -> dict[str, Any]:
    """Users, an agent, mail both ways, an attachment, a request decided with a
    standing grant, a read, a revoked token: one of everything."""
    await a.user("pia")
    await a.user("bob")
    await a.agent("claude")
    up = await a.http.post(
        "/api/v1/attachments", files={"file": ("r.txt", b"report bytes")}, headers=a.auth("pia")
    )
    assert up.status_code == 201, up.text
    att = up.json()["attachment_id"]
    first = await a.send("pia", ["claude@/srv/shop.new"], subject="Fix login", attachment_ids=[att])
    assert first.status_code == 201, first.text
    m = first.json()
    reply = await a.send(
        "claude",
        [f"pia@/srv/shop.{m['session_alias']}"],
        subject="Re: Fix login",
        body="on it",
        parent_mail_id=m["id"],
        relay_key="reply-1",
    )
    assert reply.status_code == 201, reply.text
    req = await a.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": m["session_id"],
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": "npm test"},
            "relay_key": "k1",
        },
        headers=a.auth("claude"),
    )
    assert req.status_code == 201, req.text
    d = await a.http.post(
        f"/api/v1/permissions/{req.json()['id']}/decision",
        json={"decision": "approve", "always": True, "grant_pattern": "npm"},
        headers=a.auth("pia"),
    )
    assert d.status_code == 200, d.text
    assert (await a.http.get(f"/api/v1/mail/{m['id']}", headers=a.auth("pia"))).status_code == 200
    return {"mail": m, "attachment": att}


async def table_rows(url: str) -> dict[str, list[dict[str, Any]]]:
    db = Database(url)
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        async with db.reader.connect() as conn:
            for table in metadata.sorted_tables:
                rows = await conn.execute(select(table).order_by(*table.primary_key.columns))
                out[table.name] = [dict(r) for r in rows.mappings()]
    finally:
        await db.dispose()
    return out


async def db_copy(src: str, dst: str) -> Any:
    """The real CLI command (in a thread: it runs its own event loop)."""

    def run() -> Any:
        return CliRunner().invoke(main, ["db", "copy", "--from", src, "--to", dst])

    return await anyio.to_thread.run_sync(run)


async def test_copy_to_postgresql_keeps_everything_and_the_scenario_runs_on_it(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    lite = fast_settings(tmp_path)
    async with gateway(lite) as a:
        before = await populate(a)
        tokens = dict(a.tokens)
        inbox = (
            await a.http.get("/api/v1/agent/inbox?status=all", headers=a.auth("claude"))
        ).json()
    lite_url = f"sqlite:///{lite.data_dir / 'agentmail.db'}"
    pg_url = pg_cluster.url(fresh_database(pg_cluster, "template1"))

    r = await db_copy(lite_url, pg_url)
    assert r.exit_code == 0, r.output
    assert "every table's count verified" in r.output

    # A copy into a database that is no longer empty is refused, and adds nothing.
    again = await db_copy(lite_url, pg_url)
    assert again.exit_code != 0 and "not empty" in again.output
    pg_sa = Settings(database_url=pg_url).resolved_database_url()
    copied = await table_rows(pg_sa)
    original = await table_rows(lite.resolved_database_url())
    assert copied == original
    assert len(copied["events"]) >= 4 and copied["grants"] and copied["attachments"]
    claude_events = [
        (e["id"], e["type"]) for e in copied["events"] if e["principal"] == "agent:claude"
    ]
    assert len(claude_events) >= 2, claude_events

    # The same data dir (its blob store) with the PostgreSQL copy.
    pg = fast_settings(tmp_path, database_url=pg_url)
    async with live_gateway(pg) as b:
        b.tokens.update({k: v for k, v in tokens.items() if k != "admin"})
        got = (await b.http.get("/api/v1/agent/inbox?status=all", headers=b.auth("claude"))).json()
        assert got == inbox  # the agent's old key, the same mails
        events = await collect(
            b.http,
            "/api/v1/agent/events",
            b.tokens["claude"],
            last_event_id=0,
            until=lambda g: len(g) >= len(claude_events),
        )
        assert [(e.id, e.type) for e in events] == claude_events
        dl = await b.http.get(f"/api/v1/attachments/{before['attachment']}", headers=b.auth("pia"))
        assert dl.status_code == 200 and dl.content == b"report bytes"
        # The grant still approves without asking.
        again_req = await b.http.post(
            "/api/v1/agent/permissions",
            json={
                "session_id": before["mail"]["session_id"],
                "kind": "approval",
                "tool_name": "Bash",
                "tool_input": {"command": "npm test"},
                "relay_key": "k2",
            },
            headers=b.auth("claude"),
        )
        assert again_req.json()["status"] == "approved", again_req.text
        # New ids continue after the copied ones (the sequences were moved).
        new = await b.send("pia", ["claude@/srv/shop.new"], subject="after the move")
        assert new.status_code == 201, new.text
        after = await collect(
            b.http,
            "/api/v1/agent/events",
            b.tokens["claude"],
            last_event_id=claude_events[-1][0],
            until=lambda g: any(e.data.get("mail_id") == new.json()["id"] for e in g),
        )
        assert after[-1].id > claude_events[-1][0]
        await scenarios.an_agent_cannot_pick_its_own_approver(b)

    # And back: PostgreSQL to a fresh SQLite file gives the same rows again.
    back = tmp_path / "back.db"
    r = await db_copy(pg_url, f"sqlite:///{back}")
    assert r.exit_code == 0, r.output
    assert (await table_rows(f"sqlite+aiosqlite:///{back}")) == (await table_rows(pg_sa))


async def test_copy_refuses_the_same_database_and_an_unmigrated_source(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    same = await db_copy(url, url)
    assert same.exit_code != 0 and "same database" in same.output
    empty = tmp_path / "empty.db"
    empty.touch()
    r = await db_copy(f"sqlite:///{empty}", f"sqlite:///{tmp_path / 'y.db'}")
    assert r.exit_code != 0 and "newest schema" in r.output
    assert not (tmp_path / "y.db").exists() or (tmp_path / "y.db").stat().st_size == 0
