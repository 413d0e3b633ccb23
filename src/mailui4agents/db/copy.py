"""`agentmail db copy`: move a whole installation to another database (usually
SQLite to PostgreSQL) and prove nothing was lost (docs/postgres.md).

Every table of db/tables.py is copied row by row with its own ids (events keep
their ids, so streams resume with the same Last-Event-ID), in foreign-key order,
inside ONE target transaction: a failed copy leaves the target as empty as it
was. The target is migrated to head first and must hold no rows; the source
must be at head (start the old gateway once to migrate it) and is only read, in
one read transaction. Afterwards PostgreSQL sequences are moved past the copied
ids, and every table's row count (and highest id) is compared.

Attachment bytes stay in the data dir's blob store; the new gateway uses the
same --data-dir. Stop the gateway while copying: writes made meanwhile would
not be copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.db.schema import metadata
from mailui4agents.private_files import private_file

BATCH = 1000


class CopyError(Exception):
    """The copy was refused or did not verify; the target holds nothing of it."""


@dataclass
class CopyReport:
    counts: dict[str, int] = field(default_factory=dict)  # table -> rows copied

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _serial_column(table: Table) -> str | None:
    """The auto-increment integer primary key, if the table has one."""
    pk = list(table.primary_key.columns)
    if len(pk) == 1 and pk[0].autoincrement is True:
        return pk[0].name
    return None


async def _counts(conn: AsyncConnection) -> dict[str, tuple[int, int | None]]:
    out: dict[str, tuple[int, int | None]] = {}
    for table in metadata.sorted_tables:
        n = int(await conn.scalar(select(func.count()).select_from(table)) or 0)
        col = _serial_column(table)
        top = await conn.scalar(select(func.max(table.c[col]))) if col else None
        out[table.name] = (n, None if top is None else int(top))
    return out


async def copy_database(src_url: str, dst_url: str) -> CopyReport:
    """Copy everything from `src_url` to `dst_url` (async SQLAlchemy URLs)."""
    if src_url == dst_url:
        raise CopyError("--from and --to name the same database")
    src, dst = Database(src_url), Database(dst_url)
    try:
        if await migrate.current_revision(src) != migrate.head_revision():
            raise CopyError(
                "the source database is not at the newest schema: start its gateway "
                "once (it migrates at start) and stop it, then copy"
            )
        if dst.is_sqlite and ":memory:" not in dst_url:
            private_file(Path(dst_url.split(":///", 1)[1]))
        await migrate.upgrade(dst)
        report = CopyReport()
        async with src.reader.connect() as s, dst.writer.begin() as d:
            await s.begin()
            before = await _counts(d)
            if busy := [t for t, (n, _) in before.items() if n]:
                raise CopyError(f"the target database is not empty (rows in {', '.join(busy)})")
            for table in metadata.sorted_tables:
                report.counts[table.name] = await _copy_table(s, d, table)
            if d.dialect.name == "postgresql":
                for table in metadata.sorted_tables:
                    if col := _serial_column(table):
                        await d.execute(
                            text(
                                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{col}'), "
                                f"COALESCE((SELECT MAX({col}) FROM {table.name}), 0) + 1, false)"
                            )
                        )
            want, got = await _counts(s), await _counts(d)
            if want != got:
                diff = {t: (want[t], got[t]) for t in want if want[t] != got.get(t)}
                raise CopyError(f"counts differ after the copy (source, target): {diff}")
        return report
    finally:
        await src.dispose()
        await dst.dispose()


async def _copy_table(s: AsyncConnection, d: AsyncConnection, table: Table) -> int:
    order = list(table.primary_key.columns)
    copied = 0
    result = await s.stream(select(table).order_by(*order))
    async for batch in result.mappings().partitions(BATCH):
        await d.execute(table.insert(), [dict(row) for row in batch])
        copied += len(batch)
    return copied
