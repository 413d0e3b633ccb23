"""db/auth_epoch.py and its bump in db/sqlite_driver.py: the epoch changes after
the commit of a transaction that wrote users, user_tokens, agents or agent_keys —
by any statement shape, from any engine on the file — and not for other
writes or reads (else the token cache would be emptied by every send)."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from mailui4agents.db.auth_epoch import AuthEpoch, beside, writes_auth
from mailui4agents.db.engine import Database

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE user_tokens SET revoked_at=? WHERE id = ?",
        'update "agent_keys" set expires_at=?',
        "INSERT INTO users (id, username) VALUES (?, ?)",
        "DELETE FROM agents WHERE id = ?",
        "  REPLACE INTO agent_keys VALUES (?)",
        "WITH x AS (SELECT 1) UPDATE users SET is_admin = 0",
        "INSERT INTO audit (who) SELECT username FROM users",  # over-matches: harmless
    ],
)
def test_statements_that_may_write_the_auth_tables(sql: str) -> None:
    assert writes_auth(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT users.id FROM users JOIN user_tokens ON user_tokens.user_id = users.id",
        "INSERT INTO mails (subject) VALUES (?)",
        "UPDATE agent_sessions SET status = ?",  # a word of its own, not `agents`
        "UPDATE deliveries SET user_seen = 1",
        "BEGIN IMMEDIATE",
        "PRAGMA foreign_keys=ON",
    ],
)
def test_statements_that_do_not(sql: str) -> None:
    assert not writes_auth(sql)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    async with database.write() as s:
        await s.execute(text("CREATE TABLE users (id INTEGER PRIMARY KEY, v TEXT)"))
        await s.execute(text("CREATE TABLE mails (id INTEGER PRIMARY KEY, v TEXT)"))
    try:
        yield database
    finally:
        await database.dispose()


async def test_a_committed_write_bumps_and_other_work_does_not(
    db: Database, tmp_path: Path
) -> None:
    epoch = db.auth_epoch
    assert epoch is not None
    start = epoch.value()
    async with db.write() as s:
        await s.execute(text("INSERT INTO mails (v) VALUES ('x')"))
    async with db.read() as s:
        await s.execute(text("SELECT * FROM users"))
    await db.read_rows(text("SELECT * FROM users"))
    assert epoch.value() == start

    async with db.write() as s:
        await s.execute(text("INSERT INTO users (v) VALUES ('ana')"))
        during = epoch.value()
    assert during == start  # not before SQLite committed
    assert epoch.value() != start

    # A second engine on the file (another process would do the same) bumps it
    # for this one too; the file is private.
    other = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    try:
        seen = epoch.value()
        async with other.write() as s:
            await s.execute(text("UPDATE users SET v = 'bo'"))
        assert epoch.value() != seen
    finally:
        await other.dispose()
    mode = (tmp_path / "d.db-auth").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


async def test_a_rolled_back_write_may_bump_but_never_lags(db: Database) -> None:
    epoch = db.auth_epoch
    assert epoch is not None
    start = epoch.value()
    with pytest.raises(RuntimeError):
        async with db.write() as s:
            await s.execute(text("DELETE FROM users"))
            raise RuntimeError("undo")
    assert epoch.value() != start  # one look-up too many, never a stale one


def test_an_in_memory_database_keeps_its_epoch_in_the_process() -> None:
    assert beside(":memory:") is None and beside("") is None
    epoch = AuthEpoch(None)
    before = epoch.value()
    epoch.bump()
    assert epoch.value() == before + 1


def test_postgresql_has_no_epoch_and_no_cache() -> None:
    db = Database("postgresql+asyncpg://nobody@127.0.0.1:1/none")  # never connected
    assert db.auth_epoch is None and db.token_cache is None
