"""Apply Alembic migrations at start-up.

A database already at `HEAD` (every start but the first after an upgrade) is
recognised with one plain query, and Alembic is not even imported: importing it
(with Mako and Pygments) and running its environment cost about 0.3 s of every
`agentmail serve` start. tests/db/test_migrations.py keeps `HEAD` equal to the
newest revision in migrations/versions/.

A database at a revision this version does not know was migrated by a newer
agentmail: it is refused before anything is written (docs/operations.md,
"Upgrades"), never half-read with tables this code does not expect."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from mailui4agents.db.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0024"  # the newest revision: bump it with every new migration
_PG_MIGRATE_LOCK = 0x6D696772  # any constant: one migrating replica at a time


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at our migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer agentmail than this one."""


def known_revisions() -> frozenset[str]:
    """The revisions of migrations/versions/ (``0007_calendar.py`` is ``0007``), read
    from the file names: a directory listing, not an import of Alembic."""
    names = (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
    return frozenset(path.name[:4] for path in names)


def refuse_newer(current: str | None) -> None:
    """Raise :class:`SchemaTooNew` when ``current`` is no revision of ours."""
    if current is None or current == HEAD or current in known_revisions():
        return
    from mailui4agents import __version__

    raise SchemaTooNew(
        f"the database is at schema {current}, which this agentmail {__version__} "
        f"(schema {HEAD}) does not know: a newer agentmail migrated it. Start that "
        "version or a newer one, or restore a backup taken before the upgrade; "
        "nothing was changed."
    )


def _no_sqlite_file_yet(url: str) -> bool:
    prefix = "sqlite+aiosqlite:///"
    return url.startswith(prefix) and (":memory:" in url or not Path(url[len(prefix) :]).exists())


async def check_not_newer(url: str) -> None:
    """:func:`refuse_newer` for the database at ``url``, before the server starts, so
    that `agentmail serve` says why in one line (a failure in the app's start-up
    would come wrapped in a traceback). A SQLite file that does not exist yet is
    left alone: the gateway creates it with its own permissions."""
    if _no_sqlite_file_yet(url):
        return
    db = Database(url)
    try:
        refuse_newer(await current_revision(db))
    finally:
        await db.dispose()


async def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision; refuse a newer one (SchemaTooNew)."""
    current = await current_revision(db)
    if current == HEAD:
        return
    refuse_newer(current)

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
