"""Migrations: a fresh database upgraded to head matches the tables exactly, and
every revision applies in order (an index on a later column once stopped a
production gateway from starting)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.db.fts import include_name
from mailui4agents.db.schema import metadata

pytestmark = pytest.mark.anyio


async def test_upgraded_schema_matches_the_table_definitions(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    await migrate.upgrade(db)

    def diff(conn: Connection) -> list[object]:
        ctx = MigrationContext.configure(conn, opts={"include_name": include_name})
        return list(compare_metadata(ctx, metadata))

    async with db.writer.connect() as conn:
        assert await conn.run_sync(diff) == []
    assert await migrate.current_revision(db) == migrate.head_revision()
    await db.dispose()


async def test_each_revision_applies_one_after_another(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}")
    script = ScriptDirectory.from_config(migrate.alembic_config())
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    assert len(revisions) >= 2
    for rev in revisions:

        def up(conn: Connection, rev: str = rev) -> None:
            command.upgrade(migrate.alembic_config(conn), rev)

        async with db.writer.begin() as conn:
            await conn.run_sync(up)
        assert await migrate.current_revision(db) == rev
    await db.dispose()


async def test_upgrading_twice_is_harmless(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    await migrate.upgrade(db)
    await migrate.upgrade(db)
    assert await migrate.current_revision(db) == migrate.head_revision()
    await db.dispose()


async def test_full_text_triggers_survive_every_migration(tmp_path: Path) -> None:
    """SQLite's batch mode rebuilds a table and silently drops its triggers; a
    migration that rebuilt `mails` once left search blind to every new mail."""
    from sqlalchemy import text

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    await migrate.upgrade(db)
    async with db.writer.connect() as conn:
        rows = await conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        names = {r[0] for r in rows}
    assert {"mails_fts_insert", "mails_fts_delete", "mails_fts_update"} <= names
    await db.dispose()


def test_head_is_the_newest_migration_script() -> None:
    """upgrade() skips Alembic on a database at migrate.HEAD: a new migration that
    forgot to bump HEAD would never run on an existing installation's restart."""
    assert migrate.head_revision() == migrate.newest_script_revision()


async def test_a_database_behind_head_is_upgraded_on_start(tmp_path: Path) -> None:
    """The negative control of the fast path: one revision behind → migrated."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    script = ScriptDirectory.from_config(migrate.alembic_config())
    previous = script.get_revision(migrate.HEAD).down_revision
    assert isinstance(previous, str)

    def up(conn: Connection) -> None:
        command.upgrade(migrate.alembic_config(conn), previous)

    async with db.writer.begin() as conn:
        await conn.run_sync(up)
    assert await migrate.current_revision(db) == previous
    await migrate.upgrade(db)
    assert await migrate.current_revision(db) == migrate.HEAD
    await db.dispose()


async def test_0012_gives_existing_recipient_rows_their_mails_session(tmp_path: Path) -> None:
    """Rows written before 0012 get the session of their mail: membership
    (services/access.sessions_of) reads it, a NULL would hide a session."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")

    def up_to(rev: str) -> Callable[[Connection], None]:
        return lambda conn: command.upgrade(migrate.alembic_config(conn), rev)

    async with db.writer.begin() as conn:
        await conn.run_sync(up_to("0011"))
        for sql in (
            "INSERT INTO sessions (id, alias_manual, workspace, status, permission_mode,"
            " permission_enforcement, hop_limit, created_by, created_at)"
            " VALUES ('s1', 0, '/w', 'active', 'workspace', 'advisory', 5, 'ana', '2026-01-01')",
            "INSERT INTO mails (seq, id, session_id, from_name, from_human, subject, body,"
            " type, relay, created_at) VALUES (7, 'm7', 's1', 'ana', 1, 's', 'b', 'message',"
            " 0, '2026-01-01')",
            "INSERT INTO mail_recipients (mail_seq, name, is_human, role, position)"
            " VALUES (7, 'claude', 0, 'to', 0)",
        ):
            await conn.exec_driver_sql(sql)
    async with db.writer.begin() as conn:
        await conn.run_sync(up_to("0012"))
        rows = (await conn.exec_driver_sql("SELECT session_id FROM mail_recipients")).all()
    assert [tuple(r) for r in rows] == [("s1",)]
    await db.dispose()


async def _schema(db: Database) -> list[tuple[object, ...]]:
    from sqlalchemy import text

    async with db.reader.connect() as conn:
        rows = await conn.execute(text("SELECT type, name, sql FROM sqlite_master ORDER BY name"))
        return [tuple(r) for r in rows]


async def _set_revision(db: Database, revision: str) -> None:
    from sqlalchemy import text

    async with db.writer.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


async def test_a_database_a_newer_version_migrated_is_refused_naming_both(tmp_path: Path) -> None:
    """A newer agentmail migrated it (here: a revision we do not have). Starting on
    it would read tables this code does not know; Alembic's own error ("Can't
    locate revision") named neither version. Nothing may be written."""
    from mailui4agents import __version__

    url = f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"
    db = Database(url)
    await migrate.upgrade(db)
    await _set_revision(db, "0999")
    before = await _schema(db)
    with pytest.raises(migrate.SchemaTooNew) as refused:
        await migrate.upgrade(db)
    message = str(refused.value)
    assert "schema 0999" in message and f"agentmail {__version__}" in message
    assert f"schema {migrate.head_revision()}" in message
    with pytest.raises(migrate.SchemaTooNew):
        await migrate.check_not_newer(url)
    assert await migrate.current_revision(db) == "0999"
    assert await _schema(db) == before
    await db.dispose()


async def test_an_older_known_revision_is_migrated_not_refused(tmp_path: Path) -> None:
    """The negative control: every revision of ours is upgraded as before."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'f.db'}"
    db = Database(url)

    def to_previous(conn: Connection) -> None:
        script = ScriptDirectory.from_config(migrate.alembic_config())
        head = script.get_revision(migrate.head_revision())
        assert head is not None and isinstance(head.down_revision, str)
        command.upgrade(migrate.alembic_config(conn), head.down_revision)

    async with db.writer.begin() as conn:
        await conn.run_sync(to_previous)
    await migrate.check_not_newer(url)
    await migrate.upgrade(db)
    assert await migrate.current_revision(db) == migrate.head_revision()
    await db.dispose()
    missing = f"sqlite+aiosqlite:///{tmp_path / 'none' / 'g.db'}"
    await migrate.check_not_newer(missing)  # a database yet to be created: nothing to refuse
    assert not (tmp_path / "none").exists()


def test_known_revisions_are_the_files_alembic_sees() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert migrate.known_revisions() == {r.revision for r in script.walk_revisions()}
