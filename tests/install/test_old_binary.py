"""Safe upgrades, from the old side (docs/behaviour.md#operations, "Upgrades"): an older
agentmail, installed from its own wheel, refuses a database that this one
migrated, in one line naming both schema versions, and changes nothing in it.

The old agentmail is built from OLD_COMMIT (there are no release tags yet): the
first commit whose `agentmail serve` refuses a schema newer than its own. The
test needs the git history; under CI=true a clone without it fails the run."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from pathlib import Path

import anyio
import httpx
import pytest
from sqlalchemy import text

from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess
from tests.conftest import ADMIN_PASSWORD
from tests.install.installs import REPO, build, install_in_venv, outside_env
from tests.needs import missing

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

OLD_COMMIT = "88751c5"  # "Safe upgrades": db/migrate.py refuse_newer


def _old_source(dest: Path) -> Path:
    """The tree of OLD_COMMIT (git archive), or a failure/skip without the history."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if found.returncode != 0:
        missing(
            f"commit {OLD_COMMIT} is not in this clone's history (a shallow clone: "
            "git fetch --unshallow), so the old agentmail cannot be built"
        )
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", OLD_COMMIT],
        capture_output=True,
        check=True,
        timeout=120,
    )
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tf:
        tf.extractall(dest, filter="data")
    return dest


def _snapshot(data_dir: Path) -> dict[str, str]:
    return {
        p.relative_to(data_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


async def _migrate_with_this_code(url: str, stamp: str | None) -> str | None:
    db = Database(url)
    try:
        await migrate.upgrade(db)
        if stamp is not None:
            async with db.writer.begin() as conn:
                await conn.execute(
                    text("UPDATE alembic_version SET version_num = :r"), {"r": stamp}
                )
        return await migrate.current_revision(db)
    finally:
        await db.dispose()


def test_an_old_agentmail_refuses_a_database_this_one_migrated(tmp_path: Path) -> None:
    old_tree = _old_source(tmp_path / "old-source")
    old_migrate = (old_tree / "src/mailui4agents/db/migrate.py").read_text()
    head = re.search(r'^HEAD = "(\d{4})"', old_migrate, re.MULTILINE)
    assert head is not None, "the old db/migrate.py names no HEAD"
    old_head = head.group(1)
    old_init = (old_tree / "src/mailui4agents/__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"', old_init, re.MULTILINE)
    assert version is not None
    old_version = version.group(1)
    old_known = {
        p.name[:4] for p in (old_tree / "src/mailui4agents/db/migrations/versions").glob("*.py")
    }

    wheel, _ = build(old_tree, tmp_path / "old-dist", sdist=False)
    old = install_in_venv(wheel, tmp_path / "old-venv")

    # The old agentmail makes its database and serves it: the install works, and
    # what follows is a refusal of the schema, not a broken binary.
    data = tmp_path / "data"
    env = outside_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    gp = GatewayProcess(data_dir=data, env=env, command=[str(old.agentmail)], cwd=tmp_path)
    gp.start(timeout=60)
    try:
        assert httpx.get(f"{gp.url}/healthz", timeout=30).json() == {"status": "ok"}
    finally:
        gp.stop()

    # This tree's code migrates that database forward. While this tree's newest
    # migration is one the old commit has too (no migration has landed since it),
    # a real upgrade changes nothing: then the revision is set to the next number,
    # as the next migration will leave it. The refusal reads the revision alone.
    url = f"sqlite+aiosqlite:///{data / 'agentmail.db'}"
    new_head = migrate.head_revision()
    stamp = None if new_head not in old_known else f"{int(new_head) + 1:04d}"
    newer = anyio.run(_migrate_with_this_code, url, stamp)
    assert newer is not None and newer not in old_known, (newer, sorted(old_known))
    before = _snapshot(data)

    done = subprocess.run(
        [str(old.agentmail), "serve", "--port", "0", "--data-dir", str(data)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"schema {newer}, which this agentmail {old_version}" in lines[0]
    assert f"(schema {old_head})" in lines[0]
    assert _snapshot(data) == before
