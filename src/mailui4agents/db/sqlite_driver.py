"""aiosqlite with one thread hop per statement, and a BEGIN that rides along.

aiosqlite runs every call in its connection's worker thread and wakes the event
loop for each result. SQLAlchemy's aiosqlite adapter makes four such calls per
statement (create a cursor, execute, fetch all rows, close the cursor) and our
engines sent BEGIN as a statement of its own (db/engine.py): a read unit of one
SELECT made eight hops, and every authenticated request paid for two such units
(docs/design.md, "The fixed cost of a request").

Here a statement is one call in the worker thread — cursor, execute, rows,
description, row count and last row id, cursor closed — and the transaction's
BEGIN is sent in the same call as its first statement (`begin_lazily`). A
transaction that ran no statement, or a statement run outside a transaction,
ends without a call at all; the reader's rollbacks are queued rather than
awaited (`OneHopDBAPI`). What SQLite sees is unchanged: the same BEGIN
(IMMEDIATE for the writer) before the same first statement, on the same
connection, in the same thread.

Server-side cursors (`AsyncSession.stream`, db/copy.py) keep SQLAlchemy's own
adapter; a pending BEGIN is sent before one opens.

The dialect is SQLAlchemy's aiosqlite dialect under a name of ours
(`sqlite+onehop`, `OneHopDialect`) whose instances are equal: SQLAlchemy keys a
compiled statement by the dialect object it was compiled for, so each new engine
(the writer and the reader, and every gateway a test starts) compiled every
statement again. db/engine.py gives all SQLite engines one compiled cache.

A transaction of the writer may also be *inline* (`Database.write(inline=True)`:
a send, a permission request, a decision — a few small statements each). It runs
on the event loop's thread, where SQLite answers in microseconds, without a
thread hop (each cost the send about 0.1 ms of CPU, bench/server.py):
- its `BEGIN IMMEDIATE` is tried there with a busy timeout of zero. Within the
  process the writer is one connection, so only another process can hold the
  write lock (`agentmail admin`, a restore); then nothing has begun, and the
  BEGIN goes to the worker thread as before, to wait there with the full timeout
  while the loop runs on;
- once the lock is held, its statements cannot wait for anyone (WAL: readers
  never block the writer), and run there — unless one carries more than
  `INLINE_MAX_BYTES` of text or blobs, or many rows: that one goes to the
  worker, and so does the transaction's COMMIT;
- its COMMIT runs there with SQLite's automatic checkpoint off for that commit
  (`synchronous=NORMAL`: a commit writes the WAL, never fsyncs; a checkpoint
  copies the WAL into the database and fsyncs, milliseconds). Every
  `CHECKPOINT_EVERY`-th inline commit goes to the worker with the automatic
  checkpoint on, as every other commit does, so the WAL is checkpointed as
  before, off the loop's thread.
A send went from seven hops to two, then none.

A connection also keeps the database's auth epoch (db/auth_epoch.py): a
statement that may write users, user_tokens, agents or agent_keys marks its
transaction, whose commit (or rollback) then bumps the epoch — after SQLite has
committed, so that a token look-up that starts after the bump reads the change.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_dbapi,
    SQLiteDialect_aiosqlite,
)
from sqlalchemy.util.concurrency import await_

from mailui4agents.db.auth_epoch import AuthEpoch, writes_auth

_Result = tuple[Any, list[Any], int, int | None, bool]


def _run(
    raw: sqlite3.Connection, begin: str | None, operation: str, parameters: Any, many: bool
) -> _Result:
    """In the worker thread: the pending BEGIN, then the statement, whole."""
    if begin is not None:
        raw.execute(begin)
    cursor = raw.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        else:
            cursor.execute(operation, () if parameters is None else parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid, raw.in_transaction
    finally:
        cursor.close()


#: The largest statement run inline (its text and blob parameters together): a
#: long body indexed for search takes longer than a hop.
INLINE_MAX_BYTES = 16 * 1024
INLINE_MAX_ROWS = 64  # an executemany of more rows goes to the worker
#: How long a connection waits for another's write lock (set when it connects,
#: db/engine.py), and SQLite's automatic checkpoint (its default, in WAL pages).
BUSY_TIMEOUT_MS = 30000
WAL_AUTOCHECKPOINT = 1000
#: One inline commit in this many goes to the worker thread, where SQLite may
#: checkpoint after it (an inline transaction writes a few pages: the WAL grows
#: at most this many transactions past SQLite's own threshold).
CHECKPOINT_EVERY = 32


def _begin_now(raw: sqlite3.Connection, begin: str) -> bool:
    """Send `begin` (BEGIN IMMEDIATE) on this thread if the write lock is free:
    True if it began, False if another connection holds the lock (nothing began,
    nothing waited)."""
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        raw.execute(begin)
    except sqlite3.OperationalError as error:
        if error.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return False
        raise
    finally:
        raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return True


def _commit_now(raw: sqlite3.Connection) -> None:
    """COMMIT on this thread, without the checkpoint SQLite may run after it."""
    raw.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        raw.execute("COMMIT")
    finally:
        raw.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")


def _small(parameters: Any, many: bool) -> bool:
    """Whether a statement's parameters are small enough to run inline."""
    if parameters is None:
        return True
    rows = parameters if many else (parameters,)
    if many and len(rows) > INLINE_MAX_ROWS:
        return False
    size = 0
    for row in rows:
        for value in row.values() if isinstance(row, dict) else row:
            if isinstance(value, str | bytes):
                size += len(value)
    return size <= INLINE_MAX_BYTES


class OneHopCursor:
    """A DBAPI cursor whose rows are all fetched with the statement (as
    SQLAlchemy's adapter does too, in three more hops)."""

    server_side = False
    __slots__ = ("_adapt", "_rows", "arraysize", "description", "lastrowid", "rowcount")

    def __init__(self, adapt: OneHopConnection) -> None:
        self._adapt = adapt
        self._rows: collections.deque[Any] = collections.deque()
        self.arraysize = 1
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None

    async def _call(self, operation: str, parameters: Any, many: bool) -> None:
        adapt = self._adapt
        async with adapt._execute_mutex:
            begin, adapt._begin = adapt._begin, None  # sent once, even if it fails
            conn: Any = adapt._connection  # aiosqlite.Connection
            auth = writes_auth(operation)
            if auth:
                adapt._auth_written = True  # before: a failed statement may have written
            try:
                result: _Result = await conn._execute(
                    _run, conn._conn, begin, operation, parameters, many
                )
            except BaseException:
                adapt._open = True  # unknown (BEGIN may have run): the rollback ends it
                raise
        self._took(result, auth)

    def _took(self, result: _Result, auth: bool) -> None:
        """Keep a statement's outcome, wherever it ran."""
        adapt = self._adapt
        self.description, rows, self.rowcount, self.lastrowid, adapt._open = result
        self._rows = collections.deque(rows)
        if auth and not adapt._open:  # committed on its own (no transaction around it)
            adapt._ended()

    def _inline(self, operation: str, parameters: Any, many: bool) -> bool:
        """Run the statement here, on the event loop's thread, if this is an
        inline transaction, no call of this connection is under way, the
        statement is small, and SQLite's write lock is held or free to take.
        True if it ran."""
        adapt = self._adapt
        if not adapt.inline or adapt._execute_mutex.locked():
            return False
        if not _small(parameters, many):
            adapt._heavy = True  # its COMMIT goes to the worker too
            return False
        raw = adapt._connection._conn
        if adapt._begin is not None:
            try:
                if not _begin_now(raw, adapt._begin):
                    return False  # another process writes: wait in the worker
            except BaseException:
                adapt._begin, adapt._open = None, True  # unknown: the rollback ends it
                raise
            adapt._begin, adapt._open = None, True
        elif not adapt._open:
            return False  # outside a transaction (it would commit on its own)
        auth = writes_auth(operation)
        if auth:
            adapt._auth_written = True
        try:
            result = _run(raw, None, operation, parameters, many)
        except BaseException:
            adapt._open = True  # the rollback ends it
            raise
        self._took(result, auth)
        adapt.inline_statements += 1
        return True

    def execute(self, operation: str, parameters: Any = None) -> None:
        try:
            if not self._inline(operation, parameters, many=False):
                await_(self._call(operation, parameters, False))
        except Exception as error:
            self._adapt._handle_exception(error)

    def executemany(self, operation: str, seq_of_parameters: Any) -> None:
        try:
            if not self._inline(operation, seq_of_parameters, many=True):
                await_(self._call(operation, seq_of_parameters, True))
        except Exception as error:
            self._adapt._handle_exception(error)

    async def _async_soft_close(self) -> None:
        """Nothing to close: the statement's cursor closed in the worker thread."""

    def close(self) -> None:
        self._rows.clear()

    def setinputsizes(self, *inputsizes: Any) -> None:
        pass

    def __enter__(self) -> OneHopCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        rows = self._rows
        return [rows.popleft() for _ in range(min(size or self.arraysize, len(rows)))]

    def fetchall(self) -> Sequence[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = (
        "_auth_written",
        "_begin",
        "_heavy",
        "_open",
        "inline",
        "inline_commits",
        "inline_statements",
    )

    def __init__(self, dbapi: Any, connection: Any) -> None:
        super().__init__(dbapi, connection)
        self._begin: str | None = None
        # This transaction runs on the event loop's thread (set when it begins:
        # db/engine.py); how many statements and commits did (tests).
        self.inline = False
        self.inline_statements = 0
        self.inline_commits = 0
        # A statement of this inline transaction was too big to run inline: so
        # is its COMMIT, which writes what the statement left in the page cache.
        self._heavy = False
        # Whether SQLite had a transaction open after our last statement (the
        # sqlite3 connection may only be asked in its own thread).
        self._open = False
        # Whether this transaction ran a statement that may write the auth
        # tables: its end bumps the auth epoch (db/auth_epoch.py).
        self._auth_written = False

    def _ended(self) -> None:
        """The transaction ended (committed or not): bump the epoch if it wrote
        the auth tables."""
        if self._auth_written:
            self._auth_written = False
            epoch: AuthEpoch | None = self.dbapi.auth_epoch
            if epoch is not None:
                epoch.bump()

    def begin_lazily(self, sql: str, *, inline: bool = False) -> None:
        """Send `sql` (BEGIN …) with the next statement, or never if none comes;
        `inline`: on the event loop's thread if it can (`OneHopCursor._inline`)."""
        self._begin = sql
        self.inline = inline
        self._heavy = False

    def cursor(self, server_side: bool = False) -> Any:
        if not server_side:
            return OneHopCursor(self)
        if self._begin is not None:  # SQLAlchemy's cursor opens in hops of its own
            OneHopCursor(self).execute("SELECT 1")
        self._open = True  # not followed statement by statement: end it to be sure
        self._auth_written = True  # nor its statements: count it as a write
        return super().cursor(server_side=True)

    def rollback(self) -> None:
        # A transaction whose BEGIN was never sent, or a statement run outside
        # one (Database.read_rows), has nothing to end: no hop.
        self._begin = None
        self._ended()  # a bump too many costs a look-up, never a stale principal
        if self._open:
            self._open = False
            if self._connection._connection is None:
                return  # closed: nothing to end (as SQLAlchemy's adapter does)
            if self.dbapi.queue_rollbacks:
                # Queued, not awaited: this connection's worker runs its calls in
                # order, so the rollback ends the transaction before whatever the
                # connection runs next, and the event loop is not woken for it.
                self._connection._tx.put_nowait((None, self._connection._conn.rollback))
            else:
                super().rollback()

    def commit(self) -> None:
        self._begin = None
        try:
            if self._open:
                if self._commit_here():
                    _commit_now(self._connection._conn)
                else:
                    super().commit()
                self._open = False
        finally:
            self._ended()  # after SQLite's commit (or its failure: unknown, bump)

    def _commit_here(self) -> bool:
        """Whether this COMMIT runs on the event loop's thread: an inline
        transaction's, unless a statement of it went to the worker for its size,
        or it is the one in CHECKPOINT_EVERY that lets SQLite checkpoint."""
        if not self.inline or self._heavy or self._execute_mutex.locked():
            return False
        self.inline_commits += 1
        return self.inline_commits % CHECKPOINT_EVERY != 0


class OneHopDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """Passed as `module=` to create_async_engine (db/engine.py).

    `queue_rollbacks`: for the reader, whose transactions only read — ending
    one cannot fail short of a closed connection, and the next call on it
    would report that. The writer awaits its rollbacks and commits."""

    def __init__(self, *, queue_rollbacks: bool, auth_epoch: AuthEpoch | None = None) -> None:
        super().__init__(aiosqlite, sqlite3)
        self.queue_rollbacks = queue_rollbacks
        self.auth_epoch = auth_epoch

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        adapted = super().connect(*arg, **kw)
        return OneHopConnection(self, adapted._connection)


def dbapi(*, reader: bool, auth_epoch: AuthEpoch | None = None) -> OneHopDBAPI:
    return OneHopDBAPI(queue_rollbacks=reader, auth_epoch=auth_epoch)


class OneHopDialect(SQLiteDialect_aiosqlite):
    """SQLAlchemy's aiosqlite dialect, its instances equal to each other.

    A statement compiles alike for any two: same class, same options (every
    SQLite engine is made by db/engine.py's `_sqlite_engine`), same SQLite
    library once connected (`server_version_info`); the DBAPI object they hold
    differs only in how it ends transactions, never in what SQL is written. So
    a statement compiled for one engine's dialect is found in the compiled
    caches (the engines' shared one, and the ORM mappers' own for flushes) by
    every other engine of the process."""

    supports_statement_cache = True

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.server_version_info == self.server_version_info

    def __hash__(self) -> int:
        return hash(type(self))


DRIVERNAME = "sqlite+onehop"
registry.register("sqlite.onehop", __name__, "OneHopDialect")
