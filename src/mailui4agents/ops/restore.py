"""`agentmail restore SRC DATA_DIR` (docs/backup.md): the backup of ops/backup.py
checked whole — manifest, every file's SHA-256, the schema, the target — before
anything is written, then put in place with a rename."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mailui4agents import data_lock
from mailui4agents.ops.backup import (
    _PG_TABLES_SQL,
    MANIFEST,
    PG_DUMP_FILE,
    SQLITE_FILE,
    BackupError,
    Manifest,
    _fsync_tree,
    _sqlite_facts,
    _temp_beside,
    copy_hashed,
    libpq_url,
    sha256_of,
)
from mailui4agents.private_files import fsync_path


def _backup_files(src: Path) -> Iterator[str]:
    for dirpath, _dirs, names in os.walk(src):
        for name in names:
            rel = (Path(dirpath) / name).relative_to(src).as_posix()
            if rel != MANIFEST:
                yield rel


def verify(src: Path) -> Manifest:
    """Read the manifest and check every file against it (nothing is written).
    A file missing, changed or not listed is refused by name."""
    manifest = Manifest.read(src)
    listed = set(manifest.files)
    for rel in sorted(_backup_files(src)):
        if rel not in listed:
            raise BackupError(f"{src / rel}: not listed in the manifest")
    db_file = SQLITE_FILE if manifest.database == "sqlite" else PG_DUMP_FILE
    if db_file not in listed:
        raise BackupError(f"{src / MANIFEST}: lists no {db_file}")
    for rel in sorted(listed):
        entry = manifest.files[rel]
        path = src / rel
        try:
            got, size = sha256_of(path)
        except FileNotFoundError:
            raise BackupError(f"{path}: missing (the manifest lists it)") from None
        if got != entry["sha256"] or size != entry["size"]:
            raise BackupError(
                f"{path}: its SHA-256 is {got} ({size} bytes), the manifest says "
                f"{entry['sha256']} ({entry['size']} bytes): the backup is damaged"
            )
        if rel.startswith("blobs/") and got != rel.rsplit("/", 1)[1]:
            raise BackupError(f"{path}: a blob whose bytes do not hash to its name")
    return manifest


def _refuse_target(data_dir: Path) -> None:
    if data_dir.exists() and not data_dir.is_dir():
        raise BackupError(f"{data_dir} is not a directory")
    if data_dir.is_dir():
        if data_lock.in_use(data_dir):
            raise BackupError(
                f"{data_dir} is in use: a gateway holds {data_dir / data_lock.LOCK_FILE}; "
                "stop it first (and restore into a new, empty directory)"
            )
        if any(data_dir.iterdir()):
            raise BackupError(f"{data_dir} is not empty: restore into a new, empty directory")


@dataclass(frozen=True)
class RestoreReport:
    data_dir: Path
    manifest: Manifest


def restore(src: Path, data_dir: Path, database_url: str | None = None) -> RestoreReport:
    """Restore the backup `src` into the new or empty `data_dir` (and, for a
    PostgreSQL backup, the empty database `database_url`). Refused before
    anything is written: a data dir in use or not empty, a damaged backup, a
    schema this agentmail does not know."""
    from mailui4agents.db.migrate import SchemaTooNew, refuse_newer

    _refuse_target(data_dir)
    manifest = verify(src)
    try:
        refuse_newer(manifest.schema_revision)
    except SchemaTooNew as exc:
        raise BackupError(f"{src}: {exc}") from None
    if manifest.database == "postgresql" and database_url is None:
        raise BackupError(
            f"{src} holds a PostgreSQL dump: give --database-url of an empty database"
        )
    if manifest.database == "sqlite" and database_url is not None:
        raise BackupError(
            f"{src} holds a SQLite database: it restores into the data dir; "
            "leave out --database-url (agentmail db copy moves it to PostgreSQL afterwards)"
        )
    if database_url is not None:
        _pg_refuse_nonempty(database_url)
    tmp = _temp_beside(data_dir, "restoring")
    try:
        for rel, entry in sorted(manifest.files.items()):
            if rel == PG_DUMP_FILE:
                continue
            target = tmp / (rel.removeprefix("files/"))
            got, _size = copy_hashed(src / rel, target)
            if got != entry["sha256"]:  # changed since verify() read it
                raise BackupError(f"{src / rel}: changed while being restored")
        if manifest.database == "sqlite":
            _check_counts(tmp / SQLITE_FILE, manifest)
        _fsync_tree(tmp)
        if database_url is not None:
            _pg_restore(src / PG_DUMP_FILE, database_url)
        try:
            os.rename(tmp, data_dir)  # an empty dir is replaced; a non-empty one refuses
        except OSError as exc:
            also = (
                " (the database of --database-url was restored already: drop and create "
                "it again before the next try)"
                if database_url is not None
                else ""
            )
            raise BackupError(
                f"{data_dir}: cannot move the restored files there: {exc}{also}"
            ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_path(data_dir.parent)
    return RestoreReport(data_dir=data_dir, manifest=manifest)


def _check_counts(db: Path, manifest: Manifest) -> None:
    _rev, counts, _shas = _sqlite_facts(db)
    for table, n in manifest.counts.items():
        if counts.get(table) != n:
            raise BackupError(f"{db}: {counts.get(table)} rows in {table}, the manifest says {n}")


def _pg_refuse_nonempty(database_url: str) -> None:
    import anyio

    url, env = libpq_url(database_url)

    async def tables() -> list[str]:
        import asyncpg

        conn = await asyncpg.connect(url, password=env.get("PGPASSWORD"))
        try:
            return [r[0] for r in await conn.fetch(_PG_TABLES_SQL)]
        finally:
            await conn.close()

    found = anyio.run(tables)
    if found:
        raise BackupError(
            f"the database of --database-url is not empty ({len(found)} tables, e.g. "
            f"{sorted(found)[0]}): restore into a new, empty database"
        )


def _pg_restore(dump: Path, database_url: str) -> None:
    binary = shutil.which("pg_restore")
    if binary is None:
        raise BackupError(
            "pg_restore not found on PATH: install PostgreSQL's client tools "
            "(Debian: postgresql-client)"
        )
    url, env = libpq_url(database_url)
    result = subprocess.run(
        [binary, "--exit-on-error", "--single-transaction", "--no-owner", "--no-privileges",
         "--dbname", url, str(dump)],
        env=env,
        capture_output=True,
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise BackupError(
            f"pg_restore failed ({result.returncode}), nothing was restored: "
            f"{result.stderr.decode('utf-8', 'replace').strip()[-2000:]}"
        )
