"""Apply Alembic migrations at start-up."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

from mailui4agents.db.engine import Database

MIGRATIONS = Path(__file__).parent / "migrations"
_PG_MIGRATE_LOCK = 0x6D696772  # any constant: one migrating replica at a time


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at our migrations (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision."""

    def _run(connection: Connection) -> None:
        if connection.dialect.name == "postgresql":
            # Replicas starting together: one migrates, the others wait for it
            # and then find the schema at head.
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
        command.upgrade(alembic_config(connection), "head")

    async with db.writer.begin() as conn:
        await conn.run_sync(_run)


async def current_revision(db: Database) -> str | None:
    """The revision the database is at, or None when unmigrated."""
    from alembic.runtime.migration import MigrationContext

    def _get(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with db.reader.connect() as conn:
        return await conn.run_sync(_get)


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
