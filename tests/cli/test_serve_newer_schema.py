"""`agentmail serve` on a database that a newer agentmail migrated: one clear line
naming both versions, exit 1, nothing written (docs/behaviour.md#operations)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text

from mailui4agents import __version__, testing
from mailui4agents.db import migrate
from mailui4agents.db.engine import Database

pytestmark = [pytest.mark.e2e]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]


async def _migrated_at(url: str, revision: str | None) -> None:
    db = Database(url)
    await migrate.upgrade(db)
    if revision is not None:
        async with db.writer.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    await db.dispose()


def _revision(url: str) -> str | None:
    async def read() -> str | None:
        db = Database(url)
        try:
            return await migrate.current_revision(db)
        finally:
            await db.dispose()

    return anyio.run(read)


def test_serve_refuses_a_newer_schema_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    url = f"sqlite+aiosqlite:///{data / 'agentmail.db'}"
    anyio.run(_migrated_at, url, "0999")
    done = subprocess.run(
        [*AGENTMAIL, "serve", "--port", "0", "--data-dir", str(data)],
        env=testing.clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"schema 0999, which this agentmail {__version__}" in done.stderr
    assert f"(schema {migrate.head_revision()})" in done.stderr
    assert _revision(url) == "0999"
