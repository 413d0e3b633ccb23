"""The SQLite database's auth epoch: a number that changes after every commit
that wrote `users`, `user_tokens`, `agents` or `agent_keys`, in any process.

The token cache of a SQLite gateway (services/identity.py, `authenticate_in`)
keeps a principal only while the epoch it was read under is still the epoch;
so a revocation, a rotation, an expiry set, a password reset or an admin flag
taken back is seen by the very next request of every gateway on that file.

The epoch is the size of an append-only file beside the database
(`<database>-auth`): a bump is one `write(2)` of one byte with `O_APPEND`
(atomic between processes), a read one `fstat(2)`. Every process that opens the
database through db/engine.py bumps it — gateways (several may serve one SQLite
file, docs/behaviour.md), the CLI, tests — from the SQLite driver
(db/sqlite_driver.py), after the commit of any transaction whose statements
named one of those tables (and after a rollback of one: a bump too many only
costs a look-up). A write that bypasses this package (the `sqlite3` shell) is
not seen this way: a cached principal is also re-read after `MAX_AGE_S`
(services/identity.py). An in-memory database has no file; its epoch lives in
the process.

On PostgreSQL there is no epoch and no cache: replicas on other machines share
no file, and every request reads its token (services/identity.py).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from mailui4agents.private_files import FILE_MODE

AUTH_TABLES = ("users", "user_tokens", "agents", "agent_keys")

# A statement that may write one of the tables: anything but a plain SELECT (or
# PRAGMA, BEGIN, COMMIT…) that names one of them as a word. Over-matching (an
# INSERT into another table that selects from `users`) costs a look-up, never
# a stale principal.
_NAMES = re.compile(r"\b(?:" + "|".join(AUTH_TABLES) + r")\b", re.IGNORECASE)
_READ_ONLY = ("SELECT", "PRAGMA", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
_SEEN: dict[str, bool] = {}  # statement text -> may write them (statements are few)
_SEEN_MAX = 4096


def writes_auth(sql: str) -> bool:
    """Whether the statement `sql` may write users, user_tokens, agents or agent_keys."""
    known = _SEEN.get(sql)
    if known is not None:
        return known
    head = sql.lstrip()[:9].upper()
    found = not head.startswith(_READ_ONLY) and _NAMES.search(sql) is not None
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[sql] = found
    return found


class AuthEpoch:
    """The epoch of one SQLite database (see above); `path` None: in memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd: int | None = None
        self._count = 0  # the in-memory database's epoch
        self._lock = threading.Lock()

    def _open(self) -> int:
        if self._fd is None:
            assert self.path is not None
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            with self._lock:
                if self._fd is None:
                    self._fd = fd
                else:
                    os.close(fd)
        return self._fd

    def value(self) -> int:
        """The epoch now."""
        if self.path is None:
            return self._count
        return os.fstat(self._open()).st_size

    def bump(self) -> None:
        """After a commit that wrote the tables: every cached principal is read again."""
        if self.path is None:
            with self._lock:
                self._count += 1
            return
        os.write(self._open(), b".")

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def beside(database: str) -> Path | None:
    """The epoch file of the SQLite database at `database` (a file path, or
    ':memory:' / '' for an in-memory database: None)."""
    if not database or database == ":memory:":
        return None
    return Path(database + "-auth")
