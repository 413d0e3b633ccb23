"""Engines and units of work.

SQLite allows one writer at a time. Rather than let concurrent writers collide
and retry on SQLITE_BUSY, every write goes through a writer engine with a single
connection that opens its transactions with BEGIN IMMEDIATE; readers use their own
pool and, thanks to WAL, never wait for the writer. On PostgreSQL both roles share
one ordinary pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine


def _sqlite_engine(url: str, *, writer: bool) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=1 if writer else 8,
        max_overflow=0 if writer else 8,
        pool_timeout=300,
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
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class Database:
    """The gateway's database handle: `write()` and `read()` units of work."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.writer = _sqlite_engine(url, writer=True)
            self.reader = _sqlite_engine(url, writer=False)
        else:
            self.writer = create_async_engine(url, pool_size=10, max_overflow=20)
            self.reader = self.writer

    @property
    def dialect(self) -> str:
        return self.writer.dialect.name

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction that commits when the block ends without error."""
        async with AsyncSession(self.writer, expire_on_commit=False) as session, session.begin():
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A read-only session (never commits)."""
        async with AsyncSession(self.reader, expire_on_commit=False) as session:
            yield session

    async def dispose(self) -> None:
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
