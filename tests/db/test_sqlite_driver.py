"""db/sqlite_driver.py: a statement is one call into aiosqlite's worker thread and
BEGIN rides with the first statement — yet SQLite sees the same transactions:
a read unit reads one snapshot, the writer holds the write lock from its first
statement (BEGIN IMMEDIATE), a failed write leaves nothing behind. Counts are of
calls, not timings (the CPU figures are in bench/server.py)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import bindparam, column, select, table, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine.default import DefaultDialect

from mailui4agents.db import sqlite_driver
from mailui4agents.db.engine import Database
from mailui4agents.db.sqlite_driver import OneHopDialect

pytestmark = pytest.mark.anyio


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    async with database.write() as s:
        await s.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        await s.execute(text("INSERT INTO t (v) VALUES ('a'), ('b')"))
    # Warm both pools: a first connection runs its PRAGMAs (not counted below).
    async with database.read() as s:
        await s.execute(text("SELECT 1"))
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The calls made into aiosqlite worker threads, by function name."""
    calls: list[str] = []
    real: Callable[..., Any] = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kw: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await real(self, fn, *args, **kw)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return calls


async def test_a_read_unit_of_one_select_is_one_hop_and_so_is_read_rows(
    db: Database, hops: list[str]
) -> None:
    async with db.read() as s:
        assert (await s.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all() == ["a", "b"]
    # BEGIN + SELECT in one call; the rollback queued, not awaited. Was eight hops.
    assert hops == ["_run"]
    async with db.write() as w:  # the rollback did end that snapshot:
        await w.execute(text("INSERT INTO t (v) VALUES ('c')"))
    async with db.read() as s:  # the same pooled connection, BEGIN again
        assert (await s.execute(text("SELECT count(*) FROM t"))).scalar_one() == 3
    hops.clear()
    rows = await db.read_rows(text("SELECT v FROM t WHERE id = :id"), {"id": 2})
    assert [r.v for r in rows] == ["b"]
    assert hops == ["_run"]  # no transaction: nothing to end


async def test_units_that_run_nothing_make_no_hop(db: Database, hops: list[str]) -> None:
    async with db.read():
        pass
    async with db.write():
        pass
    assert hops == []


async def test_a_write_unit_is_one_hop_per_statement_and_the_commit(
    db: Database, hops: list[str]
) -> None:
    async with db.write() as s:
        await s.execute(text("INSERT INTO t (v) VALUES ('c')"))
        await s.execute(text("UPDATE t SET v = 'cc' WHERE v = 'c'"))
    assert hops == ["_run", "_run", "commit"]
    assert [r.v for r in await db.read_rows(text("SELECT v FROM t WHERE id = 3"))] == ["cc"]


async def test_an_inline_write_makes_no_hop(db: Database, hops: list[str]) -> None:
    """Database.write(inline=True): BEGIN IMMEDIATE (the lock is free), the
    statements and the COMMIT on the loop's thread. A plain write hops for every
    statement and the commit (control)."""
    async with db.write(inline=True) as s:
        await s.execute(text("INSERT INTO t (v) VALUES ('c')"))
        await s.execute(text("UPDATE t SET v = 'cc' WHERE v = 'c'"))
        await s.execute(text("INSERT INTO t (v) VALUES ('d')"))
        got = (await s.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
        raw: Any = (await s.connection()).sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
        assert raw.inline_statements == 4
    assert raw.inline_commits == 1
    assert got == ["a", "b", "cc", "d"]  # the statements see each other's writes
    assert hops == []
    rows = await db.read_rows(text("SELECT v FROM t ORDER BY id"))
    assert [r.v for r in rows] == ["a", "b", "cc", "d"]  # committed
    hops.clear()
    async with db.write() as s:  # the same connection, a plain transaction again
        await s.execute(text("INSERT INTO t (v) VALUES ('e')"))
        await s.execute(text("INSERT INTO t (v) VALUES ('f')"))
    assert hops == ["_run", "_run", "commit"]
    assert raw.inline_statements == 4


def _main_file(path: Path) -> bytes:
    return path.read_bytes()


async def test_an_inline_commit_never_checkpoints_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hops: list[str]
) -> None:
    """SQLite may checkpoint after a commit (WAL pages copied into the database
    file, then fsync): an inline COMMIT turns that off for itself, and every
    CHECKPOINT_EVERY-th goes to the worker, where SQLite checkpoints as after any
    other commit. With a checkpoint due after every page, the database file is
    untouched by the inline commits and rewritten by the worker's."""
    monkeypatch.setattr(sqlite_driver, "WAL_AUTOCHECKPOINT", 1)
    path = tmp_path / "c.db"
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        async with db.write() as s:  # a plain commit checkpoints (control)
            await s.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
        before = _main_file(path)
        hops.clear()
        every = sqlite_driver.CHECKPOINT_EVERY
        for i in range(every - 1):
            async with db.write(inline=True) as s:
                await s.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": str(i)})
        assert hops == []
        assert _main_file(path) == before  # WAL only: no checkpoint ran
        async with db.write(inline=True) as s:
            await s.execute(text("INSERT INTO t (v) VALUES ('last')"))
            raw: Any = (await s.connection()).sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
        assert hops == ["commit"]  # the CHECKPOINT_EVERY-th, in the worker
        assert _main_file(path) != before  # SQLite checkpointed after it
        assert raw._connection._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1,)
        rows = await db.read_rows(text("SELECT count(*) FROM t"))
        assert rows[0][0] == every
    finally:
        await db.dispose()


async def test_an_inline_write_is_bound_to_the_writer_engine_itself(db: Database) -> None:
    """What is keyed by engine (the outbox senders woken after a commit, the
    kinds cache) finds the writer from an inline transaction: an engine of its
    own (execution_options on the engine) once left e-mails unsent until a poll."""
    async with db.write(inline=True) as s:
        assert s.get_bind() is db.writer.sync_engine
        await s.execute(text("SELECT 1"))
        assert s.get_bind() is db.writer.sync_engine


async def test_an_inline_write_sends_big_statements_to_the_worker(
    db: Database, hops: list[str]
) -> None:
    """Over INLINE_MAX_BYTES of text, or over INLINE_MAX_ROWS rows, a statement
    goes to the worker: it could take longer than a hop on the loop's thread."""
    big = "x" * (sqlite_driver.INLINE_MAX_BYTES + 1)
    rows = [{"v": str(i)} for i in range(sqlite_driver.INLINE_MAX_ROWS + 1)]
    async with db.write(inline=True) as s:
        await s.execute(text("SELECT 1"))
        await s.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": big})
        await s.execute(text("INSERT INTO t (v) VALUES (:v)"), rows)
        await s.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": "small"})
    # The COMMIT too: it writes what the big ones left in SQLite's page cache.
    assert hops == ["_run", "_run", "commit"]
    assert (await db.read_rows(text("SELECT count(*) FROM t")))[0][0] == 2 + 1 + len(rows) + 1


async def test_an_inline_write_waits_for_the_lock_without_blocking_the_loop(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds SQLite's write lock: the inline transaction's
    BEGIN, tried on the loop's thread without waiting, did not begin, and its
    first statement waits for the lock in the worker thread while the event loop
    runs on (were it to wait on the loop's thread, nothing here would run until
    SQLite's busy timeout gave up, and the write would fail)."""
    other = sqlite3.connect(tmp_path / "d.db", timeout=0, isolation_level=None)
    done, submitted = anyio.Event(), anyio.Event()
    real: Callable[..., Any] = aiosqlite.Connection._execute

    async def noted(self: aiosqlite.Connection, fn: Any, *args: Any, **kw: Any) -> Any:
        submitted.set()
        return await real(self, fn, *args, **kw)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", noted)

    async def write() -> None:
        async with db.write(inline=True) as s:
            await s.execute(text("INSERT INTO t (v) VALUES ('waited')"))
            await s.execute(text("INSERT INTO t (v) VALUES ('inline')"))
        done.set()

    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t (v) VALUES ('other')")
        async with anyio.create_task_group() as tg:
            started = time.monotonic()
            tg.start_soon(write)
            with anyio.fail_after(10):
                await submitted.wait()  # the first statement is in the worker
            # at once: a BEGIN waiting on the loop's thread would hold it for
            # the whole busy timeout, where fail_after cannot interrupt it
            assert time.monotonic() - started < 5
            for _ in range(100):  # the loop keeps turning while it waits there
                await anyio.lowlevel.checkpoint()
            assert not done.is_set()
            other.execute("COMMIT")
            with anyio.fail_after(30):
                await done.wait()
    finally:
        other.close()
    rows = await db.read_rows(text("SELECT v FROM t ORDER BY id"))
    assert [r.v for r in rows] == ["a", "b", "other", "waited", "inline"]


async def test_a_failed_inline_statement_leaves_nothing_and_the_connection_works_on(
    db: Database, hops: list[str]
) -> None:
    with pytest.raises(Exception, match="NOT NULL"):
        async with db.write(inline=True) as s:
            await s.execute(text("INSERT INTO t (v) VALUES ('half')"))
            await s.execute(text("INSERT INTO t (v) VALUES ('inline')"))
            await s.execute(text("INSERT INTO t (v) VALUES (NULL)"))  # fails inline
    assert hops == ["rollback"]
    rows = await db.read_rows(text("SELECT v FROM t ORDER BY id"))
    assert [r.v for r in rows] == ["a", "b"]  # all of it rolled back
    async with db.write(inline=True) as s:
        await s.execute(text("INSERT INTO t (v) VALUES ('after')"))
        await s.execute(text("INSERT INTO t (v) VALUES ('again')"))
    assert len(await db.read_rows(text("SELECT v FROM t"))) == 4


async def test_a_read_unit_reads_one_snapshot_though_a_write_commits_between(
    db: Database,
) -> None:
    """BEGIN is really sent with the first statement: without it each SELECT
    would read the newest commit."""
    async with db.read() as s:
        before = (await s.execute(text("SELECT count(*) FROM t"))).scalar_one()
        async with db.write() as w:
            await w.execute(text("INSERT INTO t (v) VALUES ('new')"))
        again = (await s.execute(text("SELECT count(*) FROM t"))).scalar_one()
    assert (before, again) == (2, 2)
    # A read outside a unit sees the commit (negative control: the insert happened).
    assert (await db.read_rows(text("SELECT count(*) FROM t")))[0][0] == 3


async def test_the_writer_holds_the_write_lock_from_its_first_statement(
    db: Database, tmp_path: Path
) -> None:
    """BEGIN IMMEDIATE still precedes the first statement, even a SELECT."""
    other = sqlite3.connect(tmp_path / "d.db", timeout=0, isolation_level=None)
    try:
        async with db.write() as s:
            await s.execute(text("SELECT count(*) FROM t"))
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again after the commit
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_a_failed_write_leaves_nothing_and_the_connection_works_on(
    db: Database, hops: list[str]
) -> None:
    with pytest.raises(Exception, match="NOT NULL"):
        async with db.write() as s:
            await s.execute(text("INSERT INTO t (v) VALUES ('half')"))
            await s.execute(text("INSERT INTO t (v) VALUES (NULL)"))
    rows = await db.read_rows(text("SELECT v FROM t ORDER BY id"))
    assert [r.v for r in rows] == ["a", "b"]  # 'half' rolled back
    assert hops[-2:] == ["rollback", "_run"]  # the writer awaits its rollback
    async with db.write() as s:  # the single writer connection is usable
        await s.execute(text("INSERT INTO t (v) VALUES ('after')"))
    assert len(await db.read_rows(text("SELECT v FROM t"))) == 3


async def test_a_failed_first_statement_rolls_back_its_begin(db: Database) -> None:
    """The statement that carried BEGIN failed: the transaction it opened is
    still ended, so the pooled connection does not keep an old snapshot."""
    with pytest.raises(Exception, match="no such table"):
        async with db.read() as s:
            await s.execute(text("SELECT * FROM missing"))
    async with db.write() as w:
        await w.execute(text("INSERT INTO t (v) VALUES ('seen')"))
    async with db.read() as s:  # the reader's pooled connection: a fresh snapshot
        assert (await s.execute(text("SELECT count(*) FROM t"))).scalar_one() == 3


async def test_server_side_cursors_still_stream_inside_the_transaction(db: Database) -> None:
    """AsyncSession.stream (db/copy.py) keeps SQLAlchemy's own cursor."""
    async with db.read() as s:
        result = await s.stream(text("SELECT v FROM t ORDER BY id"))
        assert [r.v async for r in result] == ["a", "b"]


async def test_a_statement_is_compiled_once_for_every_sqlite_engine_of_the_process(
    db: Database, tmp_path: Path
) -> None:
    """The dialects are equal (sqlite_driver.OneHopDialect) and the engines share
    one compiled cache (db/engine.py): the reader, and a second Database on
    another file (a second gateway, as every test starts one), find what the
    first writer compiled."""
    t = table("t", column("id"), column("v"))
    # The label makes the statement one no other test has compiled.
    stmt = select(t.c.v.label(f"v_{uuid.uuid4().hex}")).where(t.c.id == bindparam("id"))
    other = Database(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    try:
        async with other.write() as s:
            await s.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
            await s.execute(text("INSERT INTO t (v) VALUES ('x')"))
        seen = []
        for engine in (db.writer, db.reader, other.writer, other.reader):
            async with engine.connect() as conn:
                result = await conn.execute(stmt, {"id": 1})
                assert result.scalar_one() in ("a", "x")
                seen.append(result.context.cache_hit)
        assert seen == [
            DefaultDialect.CACHE_MISS,
            DefaultDialect.CACHE_HIT,
            DefaultDialect.CACHE_HIT,
            DefaultDialect.CACHE_HIT,
        ]
        # Negative control: another statement is compiled, not found.
        async with other.reader.connect() as conn:
            result = await conn.execute(stmt.where(t.c.v != "y"), {"id": 1})
            assert result.context.cache_hit == DefaultDialect.CACHE_MISS
    finally:
        await other.dispose()
    # Equal only to a dialect of the same class on the same SQLite library.
    assert db.writer.dialect == other.reader.dialect
    assert db.writer.dialect != sqlite.dialect()
    older = OneHopDialect()
    older.server_version_info = (3, 7, 0)
    assert db.writer.dialect != older
