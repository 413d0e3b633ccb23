"""`agentmail db check` (services/db_check.py): a healthy database says so, and each
kind of damage is named — a blob whose file is gone, a file no row names, a schema
from a newer version — with exit 1 (docs/behaviour.md#operations)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from mailui4agents.cli.main import main as cli
from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.services import db_check
from mailui4agents.services.blobs import BlobStore
from mailui4agents.settings import Settings

pytestmark = pytest.mark.anyio


def _place(store: BlobStore, content: bytes) -> str:
    sha = hashlib.sha256(content).hexdigest()
    store.path(sha).parent.mkdir(parents=True, exist_ok=True)
    store.path(sha).write_bytes(content)
    return sha


async def _database(data: Path, blobs: list[bytes]) -> str:
    """A migrated SQLite database in `data` with one attachment over each blob."""
    url = f"sqlite+aiosqlite:///{data / 'agentmail.db'}"
    db = Database(url)
    await migrate.upgrade(db)
    store = BlobStore(data / "blobs", 1 << 20)
    async with db.writer.begin() as conn:
        for i, content in enumerate(blobs):
            sha = _place(store, content)
            await conn.execute(
                text("INSERT INTO blobs (sha256, size, created_at) VALUES (:s, :n, '2026-01-01')"),
                {"s": sha, "n": len(content)},
            )
            await conn.execute(
                text(
                    "INSERT INTO attachments (id, sha256, name, content_type, size, uploaded_by,"
                    " created_at) VALUES (:i, :s, 'a.txt', 'text/plain', :n, 'ana', '2026-01-01')"
                ),
                {"i": f"att-{i}", "s": sha, "n": len(content)},
            )
    await db.dispose()
    return url


async def test_a_healthy_database_reports_its_schema_size_and_integrity(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    url = await _database(tmp_path / "d", [b"one", b"two"])
    report = await db_check.check(url, BlobStore(tmp_path / "d" / "blobs", 1 << 20))
    assert report.healthy, report
    assert (report.backend, report.schema, report.revision) == ("sqlite", "current", migrate.HEAD)
    assert report.integrity == "ok" and report.findings == []
    assert report.size_bytes > 0


async def test_each_orphan_is_named_and_counted(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    url = await _database(data, [b"kept", b"lost"])
    store = BlobStore(data / "blobs", 1 << 20)
    lost = hashlib.sha256(b"lost").hexdigest()
    store.path(lost).unlink()
    stray = _place(store, b"stray")
    _place(BlobStore(data / "blobs" / "tmp", 1 << 20), b"x")  # an upload in progress: no blob yet
    report = await db_check.check(url, store)
    assert not report.healthy
    found = {f.what: (f.count, f.examples) for f in report.findings}
    assert found == {
        "blob rows whose file is gone": (1, [lost]),
        "blob files no row names": (1, [stray]),
    }


async def test_a_schema_from_a_newer_version_is_unhealthy(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    url = await _database(tmp_path / "d", [])
    db = Database(url)
    async with db.writer.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '0999'"))
    await db.dispose()
    report = await db_check.check(url, BlobStore(tmp_path / "d" / "blobs", 1 << 20))
    assert (report.schema, report.healthy) == ("newer", False)
    assert db_check.schema_state(None) == "none"
    older = sorted(migrate.known_revisions())[0]
    assert db_check.schema_state(older) == "behind"


def test_the_command_exits_0_when_healthy_and_1_with_the_findings(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    anyio.run(_database, data, [b"kept"])
    runner = CliRunner()
    ok = runner.invoke(cli, ["db", "check", "--data-dir", str(data)], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert f"schema     {migrate.HEAD} (current" in ok.output and ok.output.endswith("healthy\n")
    BlobStore(data / "blobs", 1 << 20).path(hashlib.sha256(b"kept").hexdigest()).unlink()
    bad = runner.invoke(cli, ["db", "check", "--data-dir", str(data), "--json"])
    assert bad.exit_code == 1
    out = json.loads(bad.output)
    assert out["healthy"] is False
    assert out["findings"][0]["what"] == "blob rows whose file is gone"
    none = runner.invoke(cli, ["db", "check", "--data-dir", str(tmp_path / "empty")])
    assert none.exit_code == 1 and "no database at" in none.output


async def test_a_fresh_database_is_healthy_on_both_backends(settings: Settings) -> None:
    """PostgreSQL has no integrity pragma: without amcheck the report says "not
    checked", never "ok" for a check that did not run."""
    url, store = settings.resolved_database_url(), BlobStore.for_settings(settings)
    report = await db_check.check(url, store)
    assert report.healthy, report
    assert report.schema == "current" and report.findings == []
    if report.backend == "postgresql":
        assert report.integrity in ("ok", db_check.PG_UNCHECKED)
    else:
        assert report.integrity == "ok"
