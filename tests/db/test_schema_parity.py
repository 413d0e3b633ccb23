"""SQLite and PostgreSQL reach the same schema through the same migrations:
tables, columns (types normalised), primary keys, foreign keys, indexes and
unique constraints. Only the hand-made full-text objects differ (db/fts.py):
FTS5 tables on SQLite, the tsvector GIN index on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Boolean, DateTime, Integer, String, Text, inspect, text
from sqlalchemy.engine import Connection

from mailui4agents.db import fts, migrate
from mailui4agents.db.engine import Database
from mailui4agents.db.schema import metadata
from mailui4agents.settings import Settings
from mailui4agents.testing_pg import PgCluster
from tests.pg_fixtures import fresh_database

pytestmark = pytest.mark.anyio


def _type(t: Any) -> str:
    for cls, name in ((Boolean, "bool"), (DateTime, "datetime"), (JSON, "json")):
        if isinstance(t, cls):
            return name
    if isinstance(t, Integer):
        return "integer"  # BIGINT on PostgreSQL, SQLite's INTEGER (its only rowid type)
    if isinstance(t, Text) or (isinstance(t, String) and t.length is None):
        return "text"
    if isinstance(t, String):
        return f"string({t.length})"
    return type(t).__name__.lower()


def describe(conn: Connection) -> dict[str, Any]:
    insp = inspect(conn)
    out: dict[str, Any] = {}
    for table in sorted(insp.get_table_names()):
        if not fts.include_name(table, "table", None):
            continue
        out[table] = {
            "columns": [
                (c["name"], _type(c["type"]), c["nullable"]) for c in insp.get_columns(table)
            ],
            "pk": insp.get_pk_constraint(table)["constrained_columns"],
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                for f in insp.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in insp.get_indexes(table)
                # PostgreSQL also lists each unique constraint as its index
                if fts.include_name(i["name"], "index", None) and "duplicates_constraint" not in i
            ),
            "uniques": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(table)
            ),
        }
    return out


async def _schema(url: str) -> tuple[dict[str, Any], list[object], set[str]]:
    db = Database(url)
    await migrate.upgrade(db)

    def run(conn: Connection) -> tuple[dict[str, Any], list[object], set[str]]:
        ctx = MigrationContext.configure(conn, opts={"include_name": fts.include_name})
        diff = list(compare_metadata(ctx, metadata))
        if conn.dialect.name == "postgresql":
            rows = conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'mails'"))
        else:
            rows = conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE 'mail_fts%'"))
        return describe(conn), diff, {r[0] for r in rows}

    try:
        async with db.writer.connect() as conn:
            return await conn.run_sync(run)
    finally:
        await db.dispose()


async def test_sqlite_and_postgresql_reach_the_same_schema(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    pg_url = pg_cluster.url(fresh_database(pg_cluster, "template1"))
    lite, lite_diff, lite_fts = await _schema(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    pg, pg_diff, pg_fts = await _schema(Settings(database_url=pg_url).resolved_database_url())

    assert lite_diff == [] and pg_diff == []  # both match the table definitions
    assert set(lite) == set(pg)
    for table in lite:
        assert lite[table] == pg[table], table
    assert "mails" in lite and len(lite) >= 15  # really compared something
    # The full-text objects: FTS5 on SQLite, the GIN index on PostgreSQL.
    assert "mail_fts" in lite_fts
    assert fts.PG_INDEX in pg_fts


async def test_postgresql_search_uses_the_gin_index(pg_cluster: PgCluster) -> None:
    """The query's expression must be the index's, or PostgreSQL scans every mail."""
    pg_url = pg_cluster.url(fresh_database(pg_cluster, "template1"))
    db = Database(Settings(database_url=pg_url).resolved_database_url())
    await migrate.upgrade(db)
    try:
        async with db.writer.connect() as conn:
            await conn.execute(text("SET enable_seqscan = off"))
            plan = await conn.execute(
                text(
                    f"EXPLAIN SELECT seq FROM mails WHERE {fts.PG_DOCUMENT} "
                    f"@@ plainto_tsquery('{fts.PG_CONFIG}'::regconfig, 'login')"
                )
            )
            lines = "\n".join(r[0] for r in plan)
    finally:
        await db.dispose()
    assert fts.PG_INDEX in lines, lines
