"""Engines and units of work.

SQLite allows one writer at a time. Rather than let concurrent writers collide
and retry on SQLITE_BUSY, every write goes through a writer engine with a single
connection that opens its transactions with BEGIN IMMEDIATE; readers use their own
pool and, thanks to WAL, never wait for the writer. On PostgreSQL both roles share
one ordinary pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from sqlalchemy import event, util
from sqlalchemy.engine import Connection, Row, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable
from sqlalchemy.util import greenlet_spawn

from mailui4agents.db import sqlite_driver
from mailui4agents.db.auth_epoch import AuthEpoch, beside

# An execution option: the connection runs one read statement and no
# transaction is opened around it (Database.read_rows).
ONE_STATEMENT = "mailui4agents_one_statement"
# An execution option of the writer: after its first statement, the
# transaction's small statements run on the event loop's thread
# (db/sqlite_driver.py, Database.write(inline=True)).
INLINE = "mailui4agents_inline"
_INLINE = {INLINE: True}


# The compiled statements of every SQLite engine in the process: the writer's and
# the reader's, and those of each Database made after them (a test starts a
# gateway each). Their dialects are equal (sqlite_driver.OneHopDialect), so a
# statement is compiled once, not once per engine. Bounded as SQLAlchemy bounds
# an engine's own cache (500 each), for the two engines.
_COMPILED: util.LRUCache[Any, Any] = util.LRUCache(1000)


def _sqlite_engine(url: str, *, writer: bool, auth_epoch: AuthEpoch | None) -> AsyncEngine:
    engine = create_async_engine(
        make_url(url).set(drivername=sqlite_driver.DRIVERNAME),
        pool_size=1 if writer else 8,
        max_overflow=0 if writer else 8,
        pool_timeout=300,
        # A hop per statement (sqlite_driver.py); writes to the auth tables bump
        # the epoch (db/auth_epoch.py).
        module=sqlite_driver.dbapi(reader=not writer, auth_epoch=auth_epoch),
        execution_options={"compiled_cache": _COMPILED},
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when a transaction begins.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process crash (SIGKILL); only power loss
        # can drop the last commits.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={sqlite_driver.BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA wal_autocheckpoint={sqlite_driver.WAL_AUTOCHECKPOINT}")
        cursor.close()

    begin = "BEGIN IMMEDIATE" if writer else "BEGIN"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get(ONE_STATEMENT):
            return  # one statement is a snapshot of its own (Database.read_rows)
        raw: Any = conn.connection.dbapi_connection
        # Sent with the transaction's first statement, in the same thread hop,
        # or on the loop's thread for an inline one.
        raw.begin_lazily(begin, inline=writer and bool(options.get(INLINE)))

    return engine


P = ParamSpec("P")
R = TypeVar("R")


class InSession(Generic[P, R]):
    """A function of a sync Session that async code awaits with its AsyncSession:
    all its statements run in one greenlet (AsyncSession.run_sync), through the
    session's Connection if it likes, where one `await s.execute` each cost a
    greenlet and the ORM session's layer. `.sync` is the function itself, for
    another such function to call in the same greenlet."""

    def __init__(self, fn: Callable[Concatenate[Session, P], R]) -> None:
        self.sync = fn
        self.__doc__ = fn.__doc__

    async def __call__(self, s: AsyncSession, *args: P.args, **kwargs: P.kwargs) -> R:
        return await s.run_sync(self.sync, *args, **kwargs)


class Database:
    """The gateway's database handle: `write()` and `read()` units of work."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        # SQLite only: the auth epoch and the token cache it guards
        # (db/auth_epoch.py, services/identity.py `authenticate_in`). On
        # PostgreSQL every request reads its token: replicas share no file.
        self.auth_epoch: AuthEpoch | None = None
        self.token_cache: dict[str, Any] | None = None
        if self.is_sqlite:
            database = make_url(url).database or ""
            if not database.startswith("file:"):  # a URI's file is not named plainly: no cache
                self.auth_epoch = AuthEpoch(beside(database))
                self.token_cache = {}
            self.writer = _sqlite_engine(url, writer=True, auth_epoch=self.auth_epoch)
            self.reader = _sqlite_engine(url, writer=False, auth_epoch=self.auth_epoch)
        else:
            self.writer = create_async_engine(url, pool_size=10, max_overflow=20)
            self.reader = self.writer
        self._one_statement = self.reader.sync_engine.execution_options(**{ONE_STATEMENT: True})

    @property
    def dialect(self) -> str:
        return self.writer.dialect.name

    @asynccontextmanager
    async def write(self, *, inline: bool = False) -> AsyncIterator[AsyncSession]:
        """A transaction that commits when the block ends without error.
        `inline`: a transaction of a few small statements (a send, a permission
        request, a decision): on SQLite, those after the first run on the event
        loop's thread instead of one thread hop each (db/sqlite_driver.py).
        Run its statements through the session (`s.execute`, `s.scalar`, flushes),
        not an `AsyncConnection` of it: SQLAlchemy's AsyncConnection.execute
        insists that its statement awaits, and an inline one never does
        (AwaitRequired)."""
        # An option of the session's connection, not an engine of its own: what is
        # keyed by engine (outbox senders, the kinds cache) must see the writer.
        options = _INLINE if inline else None
        async with (
            AsyncSession(self.writer, expire_on_commit=False, execution_options=options) as session,
            session.begin(),
        ):
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A read-only session (never commits)."""
        async with AsyncSession(self.reader, expire_on_commit=False) as session:
            yield session

    async def read_rows(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> Sequence[Row[Any]]:
        """The rows of one read statement, as a unit of work of its own and in one
        step: pool checkout, statement, return, in one greenlet. On SQLite no
        transaction is opened (one statement reads one consistent snapshot) and
        the statement is one thread hop (db/sqlite_driver.py); every request's
        token look-up runs here (services/identity.py, `authenticate_in`). For
        several statements that must agree, use `read()`."""
        return await greenlet_spawn(self._read_rows, statement, params)

    def _read_rows(
        self, statement: Executable, params: Mapping[str, Any] | None
    ) -> Sequence[Row[Any]]:
        with self._one_statement.connect() as conn:
            return conn.execute(statement, params).all()

    async def dispose(self) -> None:
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
        if self.auth_epoch is not None:
            self.auth_epoch.close()
