"""Apply Alembic migrations at start-up.

A database already at `HEAD` (every start but the first after an upgrade) is
recognised with one plain query, and Alembic is not even imported: importing it
(with Mako and Pygments) and running its environment cost about 0.3 s of every
`agentmail serve` start. tests/db/test_migrations.py keeps `HEAD` equal to the
newest revision in migrations/versions/."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from mailui4agents.db.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0022"  # the newest revision: bump it with every new migration
_PG_MIGRATE_LOCK = 0x6D696772  # any constant: one migrating replica at a time


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at our migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision."""
    if await current_revision(db) == HEAD:
        return

    def _run(connection: Connection) -> None:
        from alembic import command

        if connection.dialect.name == "postgresql":
            # Replicas starting together: one migrates, the others wait for it
            # and then find the schema at head.
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
        command.upgrade(alembic_config(connection), "head")

    async with db.writer.begin() as conn:
        await conn.run_sync(_run)


async def current_revision(db: Database) -> str | None:
    """The revision the database is at, or None when unmigrated (no version table)."""

    def _get(connection: Connection) -> str | None:
        if not inspect(connection).has_table("alembic_version"):
            return None
        row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
        return None if row is None else str(row[0])

    async with db.reader.connect() as conn:
        return await conn.run_sync(_get)


def head_revision() -> str:
    return HEAD


def newest_script_revision() -> str | None:
    """The head of migrations/versions/ as Alembic sees it (for the test on HEAD)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
