"""The token cache of a SQLite gateway (services/identity.py, `authenticate_in`;
db/auth_epoch.py) never outlives a change: for every way a token or key stops
working or a principal changes — revoked, rotated (at once or past its grace),
expired, its password reset, its admin flag taken back, its row changed or
deleted by another engine on the file, by Core statement or ORM flush — the
very next request after the change is refused or sees the change, however often
the token was used (and cached) before. A change rolled back changes nothing.

In-process app on both backends (on PostgreSQL nothing is cached: the same
answers, read every time); tests/api/test_token_lookup.py makes the changes
from another process against a real gateway, and this module's last test
through the API of one."""

from __future__ import annotations

import sqlite3
import time
import types
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete, select, update

from mailui4agents.db.engine import Database
from mailui4agents.db.tables import AgentKeyRow, AgentRow, UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import identity
from mailui4agents.settings import Settings
from mailui4agents.testing import GatewayProcess
from tests.conftest import ADMIN_PASSWORD, Api, admin_api, started_app

pytestmark = pytest.mark.anyio

TOKENS, INBOX, USERS = "/api/v1/auth/tokens", "/api/v1/agent/inbox", "/api/v1/admin/users"
WARM = 4  # uses before the change: a cache holds the token after the first


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def status(http: httpx.AsyncClient, path: str, token: str) -> int:
    return (await http.get(path, headers=bearer(token))).status_code


async def warm(http: httpx.AsyncClient, *uses: tuple[str, str]) -> None:
    for _ in range(WARM):
        for path, token in uses:
            assert await status(http, path, token) == 200


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with started_app(settings) as app:
        yield app


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[Api]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        a = Api(http)
        await a.login("admin", ADMIN_PASSWORD)
        yield a


@pytest.fixture
async def other(settings: Settings) -> AsyncIterator[Database]:
    """A second engine on the gateway's database, in this process (not the
    gateway's own: its writes must reach the gateway's cache all the same)."""
    db = Database(settings.resolved_database_url())
    try:
        yield db
    finally:
        await db.dispose()


def later(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    """The gateway's clock for token look-ups is `by` ahead of the real one (no waiting)."""
    now: Callable[[], datetime] = utcnow
    monkeypatch.setattr(identity, "utcnow", lambda: now() + by)


async def token_id(http: httpx.AsyncClient, token: str) -> str:
    listed = (await http.get(TOKENS, headers=bearer(token))).json()["items"]
    [found] = [t["id"] for t in listed if t["current"]]
    return str(found)


async def key_id(api: Api, agent: str, key: str) -> str:
    listed = await api.http.get("/api/v1/admin/agents", headers=api.auth("admin"))
    [row] = [a for a in listed.json()["items"] if a["name"] == agent]
    [found] = [k["key_id"] for k in row["keys"] if key.startswith(k["prefix"])]
    return str(found)


async def test_a_revoked_user_token_is_refused_at_the_next_request(api: Api) -> None:
    ana = await api.user("ana")
    r = await api.http.post(TOKENS, json={"name": "ci"}, headers=bearer(ana))
    ci = r.json()["token"]
    ci_id = await token_id(api.http, ci)
    await warm(api.http, (TOKENS, ana), (TOKENS, ci))
    r = await api.http.delete(f"{TOKENS}/{ci_id}", headers=bearer(ana))
    assert r.status_code == 200, r.text
    assert await status(api.http, TOKENS, ci) == 401
    assert await status(api.http, TOKENS, ana) == 200  # her other token: untouched


async def test_a_revoked_agent_key_is_refused_at_the_next_request(api: Api) -> None:
    bot, spare = await api.agent("bot"), await api.agent("spare")
    await warm(api.http, (INBOX, bot), (INBOX, spare))
    kid = await key_id(api, "bot", bot)
    r = await api.http.delete(f"/api/v1/admin/agents/bot/keys/{kid}", headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    assert await status(api.http, INBOX, bot) == 401
    assert await status(api.http, INBOX, spare) == 200


async def test_a_key_rotated_without_grace_is_refused_at_the_next_request(api: Api) -> None:
    old = await api.agent("bot")
    await warm(api.http, (INBOX, old))
    r = await api.http.post("/api/v1/admin/agents/bot/keys", headers=api.auth("admin"))
    assert r.status_code == 201, r.text
    assert await status(api.http, INBOX, old) == 401
    assert await status(api.http, INBOX, r.json()["key"]) == 200


async def test_a_key_past_its_grace_is_refused_with_no_write_in_between(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = await api.agent("bot")
    r = await api.http.post("/api/v1/admin/agents/bot/keys?grace_s=600", headers=api.auth("admin"))
    assert r.status_code == 201, r.text
    new = r.json()["key"]
    await warm(api.http, (INBOX, old), (INBOX, new))  # cached, with its end
    later(monkeypatch, timedelta(seconds=599))
    assert await status(api.http, INBOX, old) == 200  # still within its grace
    later(monkeypatch, timedelta(seconds=601))  # past it; nothing was written
    assert await status(api.http, INBOX, old) == 401
    assert await status(api.http, INBOX, new) == 200


async def test_an_expired_login_token_is_refused_with_no_write_in_between(
    api: Api, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    ana = await api.user("ana")  # a login: it expires
    r = await api.http.post(TOKENS, json={"name": "ci"}, headers=bearer(ana))
    named = r.json()["token"]  # a named token: until revoked
    await warm(api.http, (TOKENS, ana), (TOKENS, named))
    later(monkeypatch, timedelta(seconds=settings.login_token_ttl_s + 1))
    assert await status(api.http, TOKENS, ana) == 401
    assert await status(api.http, TOKENS, named) == 200


async def test_a_password_reset_ends_the_users_tokens_at_the_next_request(api: Api) -> None:
    ana, bo = await api.user("ana"), await api.user("bo")
    await warm(api.http, (TOKENS, ana), (TOKENS, bo))
    r = await api.http.put(
        f"{USERS}/ana/password", json={"password": "a-new-password"}, headers=api.auth("admin")
    )
    assert r.status_code == 200, r.text
    assert await status(api.http, TOKENS, ana) == 401
    assert await status(api.http, TOKENS, bo) == 200
    assert await status(api.http, TOKENS, api.tokens["admin"]) == 200


async def test_an_admin_flag_taken_back_holds_at_the_next_request(api: Api) -> None:
    boss = await api.user("boss", is_admin=True)
    await warm(api.http, (USERS, boss))
    r = await api.http.patch(f"{USERS}/boss", json={"is_admin": False}, headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    assert await status(api.http, USERS, boss) == 403
    assert await status(api.http, TOKENS, boss) == 200  # still a user
    r = await api.http.patch(f"{USERS}/boss", json={"is_admin": True}, headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    assert await status(api.http, USERS, boss) == 200  # and given back: at once too


async def test_a_core_update_by_another_engine_holds_at_the_next_request(
    api: Api, other: Database
) -> None:
    ana, bo = await api.user("ana"), await api.user("bo")
    await warm(api.http, (TOKENS, ana), (TOKENS, bo))
    async with other.write() as s:
        await s.execute(
            update(UserTokenRow)
            .where(UserTokenRow.token_hash == identity.hash_token(ana))
            .values(revoked_at=utcnow())
        )
    assert await status(api.http, TOKENS, ana) == 401
    assert await status(api.http, TOKENS, bo) == 200


async def test_an_orm_flush_by_another_engine_holds_at_the_next_request(
    api: Api, other: Database
) -> None:
    bot, spare = await api.agent("bot"), await api.agent("spare")
    await warm(api.http, (INBOX, bot), (INBOX, spare))
    async with other.write() as s:
        row = await s.scalar(
            select(AgentKeyRow).where(AgentKeyRow.key_hash == identity.hash_token(bot))
        )
        assert row is not None
        row.expires_at = utcnow() - timedelta(seconds=1)  # written by the flush
    assert await status(api.http, INBOX, bot) == 401
    assert await status(api.http, INBOX, spare) == 200


async def test_a_deleted_user_is_refused_at_the_next_request(api: Api, other: Database) -> None:
    ana, bo = await api.user("ana"), await api.user("bo")
    await warm(api.http, (TOKENS, ana), (TOKENS, bo))
    async with other.write() as s:  # the tokens go with it (ON DELETE CASCADE)
        user_id = await s.scalar(select(UserRow.id).where(UserRow.username == "ana"))
        await s.execute(delete(UserRow).where(UserRow.id == user_id))
    assert await status(api.http, TOKENS, ana) == 401
    assert await status(api.http, TOKENS, bo) == 200


async def test_a_deleted_agent_is_refused_at_the_next_request(api: Api, other: Database) -> None:
    bot, spare = await api.agent("bot"), await api.agent("spare")
    await warm(api.http, (INBOX, bot), (INBOX, spare))
    async with other.write() as s:  # its keys go with it (ON DELETE CASCADE)
        await s.execute(delete(AgentRow).where(AgentRow.name == "bot"))
    assert await status(api.http, INBOX, bot) == 401
    assert await status(api.http, INBOX, spare) == 200


async def test_a_revocation_rolled_back_changes_nothing(api: Api, other: Database) -> None:
    ana = await api.user("ana")
    await warm(api.http, (TOKENS, ana))

    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        async with other.write() as s:
            await s.execute(
                update(UserTokenRow)
                .where(UserTokenRow.token_hash == identity.hash_token(ana))
                .values(revoked_at=utcnow())
            )
            raise Undo
    assert await status(api.http, TOKENS, ana) == 200


async def test_sqlite_reads_a_used_token_once_and_postgresql_every_time(
    api: Api, app: FastAPI, db_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is there on SQLite (else the tests above prove nothing about
    it), and only there."""
    ana = await api.user("ana")
    await warm(api.http, (TOKENS, ana))
    db: Database = app.state.gateway.db
    looked_up: list[Any] = []
    read_rows = db.read_rows

    async def counted(statement: Any, params: Any = None) -> Any:
        if params is not None and "digest" in params:
            looked_up.append(params["digest"])
        return await read_rows(statement, params)

    monkeypatch.setattr(db, "read_rows", counted)
    for _ in range(5):
        assert await status(api.http, TOKENS, ana) == 200
    assert len(looked_up) == (0 if db_backend == "sqlite" else 5)
    # An unknown token is read every time (never kept), on both.
    for _ in range(3):
        assert await status(api.http, TOKENS, "am_user_" + "x" * 43) == 401
    assert len(looked_up) == (3 if db_backend == "sqlite" else 8)


# --- a real gateway process -----------------------------------------------------------


async def test_a_real_gateway_refuses_at_the_next_request_after_each_change(
    gateway_process: GatewayProcess,
) -> None:
    async with admin_api(gateway_process.url) as live:
        ana, boss = await live.user("ana"), await live.user("boss", is_admin=True)
        r = await live.http.post(TOKENS, json={"name": "ci"}, headers=bearer(ana))
        ci = r.json()["token"]
        ci_id = await token_id(live.http, ci)
        bot, spare = await live.agent("bot"), await live.agent("spare")
        http = live.http
        await warm(http, (TOKENS, ana), (TOKENS, ci), (USERS, boss), (INBOX, bot), (INBOX, spare))

        assert (await http.delete(f"{TOKENS}/{ci_id}", headers=bearer(ana))).status_code == 200
        assert await status(http, TOKENS, ci) == 401
        assert await status(http, TOKENS, ana) == 200

        r = await http.post("/api/v1/admin/agents/bot/keys", headers=live.auth("admin"))
        assert r.status_code == 201, r.text
        assert await status(http, INBOX, bot) == 401
        assert await status(http, INBOX, r.json()["key"]) == 200
        assert await status(http, INBOX, spare) == 200

        r = await http.patch(f"{USERS}/boss", json={"is_admin": False}, headers=live.auth("admin"))
        assert r.status_code == 200, r.text
        assert await status(http, USERS, boss) == 403

        r = await http.put(
            f"{USERS}/ana/password", json={"password": "a-new-password"}, headers=live.auth("admin")
        )
        assert r.status_code == 200, r.text
        assert await status(http, TOKENS, ana) == 401
        assert await status(http, TOKENS, boss) == 200


async def test_mail_and_approvals_leave_the_epoch_alone(api: Api, app: FastAPI) -> None:
    """A send, a reply, a permission request and its decision write no user,
    token, agent or key: the cache survives them (else every request after a
    send would read its token again)."""
    epoch = app.state.gateway.db.auth_epoch
    ana = await api.user("ana")
    bot = await api.agent("bot")
    if epoch is None:
        return  # PostgreSQL: no epoch
    start = epoch.value()
    first = await api.send("ana", ["bot@/srv/shop.new"], subject="work")
    assert first.status_code == 201, first.text
    reply = await api.send("bot", ["ana@/srv/shop"], parent_mail_id=first.json()["id"])
    assert reply.status_code == 201, reply.text
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": first.json()["session_id"], "tool_name": "Bash",
              "tool_input": {"command": "make test"}, "relay_key": "k1"},
        headers=bearer(bot),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    d = await api.http.post(
        f"/api/v1/permissions/{r.json()['id']}/decision",
        json={"decision": "approve"},
        headers=bearer(ana),
    )
    assert d.status_code == 200, d.text
    assert epoch.value() == start


async def test_a_write_from_outside_the_package_holds_within_the_max_age(
    api: Api, settings: Settings, db_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sqlite3 shell bumps no epoch: a cached principal then lives at most
    TOKEN_CACHE_MAX_AGE_S (the clock of the cache moved, no waiting). On
    PostgreSQL nothing is cached: refused at once."""
    ana, bo = await api.user("ana"), await api.user("bo")
    await warm(api.http, (TOKENS, ana), (TOKENS, bo))
    digest = identity.hash_token(ana)
    if db_backend == "sqlite":
        path = settings.resolved_database_url().split(":///", 1)[1]
        with sqlite3.connect(path) as raw:
            raw.execute(
                "UPDATE user_tokens SET revoked_at = ? WHERE token_hash = ?",
                (utcnow().isoformat(), digest),
            )
        raw.close()
        assert await status(api.http, TOKENS, ana) == 200  # within the max age: the limit
        real = time.monotonic
        ahead = types.SimpleNamespace(
            monotonic=lambda: real() + identity.TOKEN_CACHE_MAX_AGE_S + 0.1
        )
        monkeypatch.setattr(identity, "time", ahead)
    else:
        db = Database(settings.resolved_database_url())
        try:
            async with db.write() as s:
                await s.execute(
                    update(UserTokenRow)
                    .where(UserTokenRow.token_hash == digest)
                    .values(revoked_at=utcnow())
                )
        finally:
            await db.dispose()
    assert await status(api.http, TOKENS, ana) == 401
    assert await status(api.http, TOKENS, bo) == 200
