"""Backup and restore without a gateway process (docs/backup.md): the data dir's
lock, the manifest's checks, a blob swept after the snapshot, a newer schema.
tests/e2e/test_backup_e2e.py runs the whole thing against a running gateway."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from mailui4agents import data_lock
from mailui4agents.ops import backup as bk
from mailui4agents.ops import restore as rs
from tests.conftest import copy_template


@pytest.fixture
def data_dir(tmp_path: Path, template_db: Path) -> Path:
    d = tmp_path / "data"
    copy_template(template_db, d)
    return d


def add_blob(data_dir: Path, content: bytes, *, on_disk: bool = True) -> str:
    sha = hashlib.sha256(content).hexdigest()
    if on_disk:
        (data_dir / "blobs" / sha[:2]).mkdir(parents=True, exist_ok=True)
        (data_dir / "blobs" / sha[:2] / sha).write_bytes(content)
    con = sqlite3.connect(data_dir / "agentmail.db")
    with con:
        con.execute(
            "INSERT INTO blobs (sha256, size, created_at) VALUES (?, ?, '2026-01-01 00:00:00')",
            (sha, len(content)),
        )
    con.close()
    return sha


def test_the_lock_tells_a_data_dir_in_use(tmp_path: Path) -> None:
    assert not data_lock.in_use(tmp_path)  # no lock file: nobody
    fd = data_lock.hold_shared(tmp_path)
    second = data_lock.hold_shared(tmp_path)  # replicas share it
    assert data_lock.in_use(tmp_path)
    data_lock.release(fd)
    assert data_lock.in_use(tmp_path)
    data_lock.release(second)
    assert not data_lock.in_use(tmp_path)  # the file stays, the lock is gone


def test_backup_copies_the_blobs_the_copy_names_and_restore_round_trips(
    data_dir: Path, tmp_path: Path
) -> None:
    sha = add_blob(data_dir, b"attached bytes")
    stray = hashlib.sha256(b"not in the database").hexdigest()
    (data_dir / "blobs" / stray[:2]).mkdir(parents=True, exist_ok=True)
    (data_dir / "blobs" / stray[:2] / stray).write_bytes(b"not in the database")
    (data_dir / "vapid_private.pem").write_text("key")
    report = bk.backup(data_dir, tmp_path / "b")
    files = report.manifest.files
    assert set(files) == {"agentmail.db", f"blobs/{sha[:2]}/{sha}", "files/vapid_private.pem"}
    assert report.manifest.counts["blobs"] == 1 and report.attempts == 1

    out = tmp_path / "restored"
    rs.restore(tmp_path / "b", out)
    assert (out / "blobs" / sha[:2] / sha).read_bytes() == b"attached bytes"
    assert (out / "vapid_private.pem").read_text() == "key"
    assert not (out / "blobs" / stray[:2] / stray).exists()


def test_a_blob_gone_after_every_snapshot_fails_the_backup_and_leaves_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    sha = add_blob(data_dir, b"swept", on_disk=False)
    with pytest.raises(bk.BackupError, match=f"blob {sha} vanished after each of 3 snapshots"):
        bk.backup(data_dir, tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_blob_swept_between_two_snapshots_is_retried(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep that deletes the file (and then its row) after the first snapshot:
    the second snapshot no longer names it, and the backup holds neither."""
    sha = add_blob(data_dir, b"swept meanwhile", on_disk=False)
    real = bk._sqlite_copy

    def copy_then_sweep(live: Path, copy: Path) -> None:
        real(live, copy)
        con = sqlite3.connect(live)
        with con:
            con.execute("DELETE FROM blobs WHERE sha256 = ?", (sha,))
        con.close()

    monkeypatch.setattr(bk, "_sqlite_copy", copy_then_sweep)
    report = bk.backup(data_dir, tmp_path / "b")
    assert report.attempts == 2 and report.manifest.counts["blobs"] == 0


def test_backup_refuses_a_destination_that_exists_or_is_inside_the_data_dir(
    data_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(bk.BackupError, match="exists already"):
        bk.backup(data_dir, tmp_path)
    with pytest.raises(bk.BackupError, match="inside the data dir"):
        bk.backup(data_dir, data_dir / "backup")
    assert not (data_dir / "backup").exists()


@pytest.fixture
def backup_dir(data_dir: Path, tmp_path: Path) -> Path:
    add_blob(data_dir, b"one")
    bk.backup(data_dir, tmp_path / "b")
    return tmp_path / "b"


def rewrite_manifest(backup_dir: Path, change: dict[str, object]) -> None:
    path = backup_dir / "manifest.json"
    data = json.loads(path.read_text())
    data.update(change)
    path.write_text(json.dumps(data))


def test_a_manifest_naming_a_path_outside_the_backup_is_refused(
    backup_dir: Path, tmp_path: Path
) -> None:
    data = json.loads((backup_dir / "manifest.json").read_text())
    files = data["files"] | {"../outside": {"sha256": "0" * 64, "size": 1}}
    rewrite_manifest(backup_dir, {"files": files})
    with pytest.raises(bk.BackupError, match=re.escape("'../outside' is not a file of a backup")):
        rs.restore(backup_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_file_not_in_the_manifest_or_missing_is_refused_by_name(
    backup_dir: Path, tmp_path: Path
) -> None:
    extra = backup_dir / "files" / "planted"
    extra.parent.mkdir(exist_ok=True)
    extra.write_text("x")
    with pytest.raises(bk.BackupError, match=re.escape(f"{extra}: not listed in the manifest")):
        rs.restore(backup_dir, tmp_path / "out")
    extra.unlink()
    db = backup_dir / "agentmail.db"
    db.unlink()
    with pytest.raises(bk.BackupError, match=re.escape(f"{db}: missing")):
        rs.restore(backup_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_backup_of_a_newer_schema_is_refused(backup_dir: Path, tmp_path: Path) -> None:
    rewrite_manifest(backup_dir, {"schema_revision": "9999"})
    with pytest.raises(bk.BackupError, match="schema 9999"):
        rs.restore(backup_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_restore_into_an_empty_existing_dir_and_a_sqlite_backup_with_a_url(
    backup_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(bk.BackupError, match="leave out --database-url"):
        rs.restore(backup_dir, tmp_path / "out", "postgresql://u@localhost/x")
    empty = tmp_path / "empty"
    empty.mkdir()
    rs.restore(backup_dir, empty)
    assert (empty / "agentmail.db").is_file()
    assert oct(empty.stat().st_mode & 0o777) == "0o700"
    shutil.rmtree(empty)
