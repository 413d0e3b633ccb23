"""`agentmail backup DEST` (docs/backup.md); its restore is ops/restore.py.

A backup is a directory:

    manifest.json        what is inside, with the SHA-256 and size of every file
    agentmail.db         SQLite: a copy by SQLite's online backup API
    database.dump        PostgreSQL: pg_dump --format=custom
    blobs/ab/<sha256>    every blob a row of the copied database names
    files/<name>         the data dir's other top-level files (vapid_private.pem, …)

Consistency (docs/backup.md, "Why it is consistent"): the database is copied
first, as one snapshot; then exactly the blobs that snapshot names. A blob file
is placed before the row naming it commits and its bytes never change (its name
is their hash), so every blob the snapshot names is on disk when the copy is
taken — unless a sweep deleted it after the snapshot (a blob or attachment that
no mail of the snapshot needed any more, or whose mail was deleted meanwhile).
Then the whole copy is taken again, with a newer snapshot (at most ATTEMPTS
times), so the backup never holds a row whose blob it lacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mailui4agents import __version__, data_lock
from mailui4agents.private_files import DIR_MODE, create_private, fsync_path, private_dir

FORMAT = "agentmail-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SQLITE_FILE = "agentmail.db"
PG_DUMP_FILE = "database.dump"
ATTEMPTS = 3
CHUNK = 1024 * 1024
MANIFEST_MAX_BYTES = 256 * 1024 * 1024  # a manifest lists files; never read a bigger one
# Top-level names of the data dir that are not copied as `files/`: the database
# (copied by the backup API), its journals, its auth epoch (db/auth_epoch.py:
# only ever compared with itself), the lock, the blob store.
NOT_FILES = {
    SQLITE_FILE,
    f"{SQLITE_FILE}-wal",
    f"{SQLITE_FILE}-shm",
    f"{SQLITE_FILE}-journal",
    f"{SQLITE_FILE}-auth",
    data_lock.LOCK_FILE,
    "blobs",
}
# Rows counted into the manifest (and compared again after a restore).
COUNTED = (
    "users",
    "agents",
    "sessions",
    "mails",
    "attachments",
    "blobs",
    "permissions",
    "grants",
    "calendar_entries",
    "events",
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SAFE_PATH = re.compile(
    r"^(?:agentmail\.db|database\.dump|blobs/[0-9a-f]{2}/[0-9a-f]{64}|files/[A-Za-z0-9._-]{1,200})$"
)


class BackupError(RuntimeError):
    """The backup or restore cannot go on; the message says why, naming the file."""


@dataclass
class Manifest:
    database: str  # "sqlite" | "postgresql"
    schema_revision: str | None
    created_at: str
    counts: dict[str, int]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    agentmail_version: str = __version__

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "agentmail_version": self.agentmail_version,
                "database": self.database,
                "schema_revision": self.schema_revision,
                "created_at": self.created_at,
                "counts": self.counts,
                "files": self.files,
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def read(cls, src: Path) -> Manifest:
        path = src / MANIFEST
        try:
            if path.stat().st_size > MANIFEST_MAX_BYTES:
                raise BackupError(f"{path}: larger than {MANIFEST_MAX_BYTES} bytes")
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            raise BackupError(f"{path} is missing: {src} is no agentmail backup") from None
        except (OSError, ValueError) as exc:
            raise BackupError(f"{path}: unreadable: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BackupError(f"{path}: not an agentmail backup manifest")
        if data.get("format_version") != FORMAT_VERSION:
            raise BackupError(
                f"{path}: backup format {data.get('format_version')!r}; "
                f"this agentmail {__version__} reads format {FORMAT_VERSION}"
            )
        files = data.get("files")
        if data.get("database") not in ("sqlite", "postgresql") or not isinstance(files, dict):
            raise BackupError(f"{path}: 'database' or 'files' is missing or wrong")
        for name, entry in files.items():
            ok = (
                isinstance(name, str)
                and _SAFE_PATH.match(name)
                and isinstance(entry, dict)
                and isinstance(entry.get("sha256"), str)
                and _SHA256.match(entry["sha256"])
                and isinstance(entry.get("size"), int)
            )
            if not ok:
                raise BackupError(f"{path}: entry {name!r} is not a file of a backup")
        return cls(
            database=data["database"],
            schema_revision=data.get("schema_revision"),
            created_at=str(data.get("created_at")),
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            files=files,
            agentmail_version=str(data.get("agentmail_version")),
        )


@dataclass(frozen=True)
class BackupReport:
    path: Path
    manifest: Manifest
    attempts: int


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- files -------------------------------------------------------------------------


def sha256_of(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def copy_hashed(src: Path, dst: Path) -> tuple[str, int]:
    """Copy `src` to a new private file `dst` (fsynced), hashing what was copied."""
    private_dir(dst.parent)
    h = hashlib.sha256()
    size = 0
    with src.open("rb") as fin, os.fdopen(create_private(dst), "wb") as fout:
        while chunk := fin.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            fout.write(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    return h.hexdigest(), size


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, _files in os.walk(root):
        fsync_path(Path(dirpath))


def _temp_beside(target: Path, what: str) -> Path:
    """A new private directory next to `target` (same file system: the rename is atomic)."""
    private_dir(target.parent)
    tmp = target.parent / f".{target.name}.{what}-{uuid.uuid4().hex[:12]}"
    os.mkdir(tmp, DIR_MODE)
    os.chmod(tmp, DIR_MODE)
    return tmp


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


# --- backup ------------------------------------------------------------------------


def _sqlite_copy(live: Path, copy: Path) -> None:
    """One snapshot of the live database (WAL: the gateway keeps writing) into `copy`.

    `Connection.backup` with its default pages=-1 copies every page in one step,
    inside one read transaction: one consistent snapshot, never restarted by a
    write. The copy is then made a self-contained file (no WAL) and checked."""
    if not live.is_file():
        raise BackupError(f"{live}: no database here (is --data-dir right?)")
    os.close(create_private(copy))
    src = sqlite3.connect(f"file:{live}?mode=rw", uri=True, timeout=60)
    try:
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
            row = dst.execute("PRAGMA quick_check").fetchone()
            if row is None or row[0] != "ok":
                raise BackupError(f"{live}: the copy fails SQLite's quick_check: {row}")
        finally:
            dst.close()
    finally:
        src.close()


def _sqlite_facts(copy: Path) -> tuple[str | None, dict[str, int], set[str]]:
    """Schema revision, row counts and the blobs the copy names."""
    con = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        return _facts(lambda sql: con.execute(sql).fetchall())
    finally:
        con.close()


def _facts(query: Any) -> tuple[str | None, dict[str, int], set[str]]:
    tables = {r[0] for r in query(_TABLES_SQL)}
    revision = None
    if "alembic_version" in tables:
        rows = query("SELECT version_num FROM alembic_version")
        revision = str(rows[0][0]) if rows else None
    counts = {t: int(query(f"SELECT count(*) FROM {t}")[0][0]) for t in COUNTED if t in tables}
    shas: set[str] = set()
    if "blobs" in tables:
        shas |= {str(r[0]) for r in query("SELECT sha256 FROM blobs")}
    if "attachments" in tables:
        shas |= {str(r[0]) for r in query("SELECT sha256 FROM attachments")}
    return revision, counts, shas


_TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"
_PG_TABLES_SQL = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"


class _BlobGone(Exception):
    def __init__(self, sha256: str) -> None:
        self.sha256 = sha256


def _copy_blobs(shas: Iterable[str], live_blobs: Path, dest: Path, files: dict[str, Any]) -> None:
    for sha in sorted(shas):
        if not _SHA256.match(sha):
            raise BackupError(f"the database names a blob {sha!r} that is no sha256")
        rel = f"blobs/{sha[:2]}/{sha}"
        try:
            got, size = copy_hashed(live_blobs / sha[:2] / sha, dest / rel)
        except FileNotFoundError:
            raise _BlobGone(sha) from None
        if got != sha:  # a blob's bytes never change: this one is damaged on disk
            raise BackupError(f"{live_blobs / sha[:2] / sha}: its bytes hash to {got}")
        files[rel] = {"sha256": got, "size": size}


def _copy_other_files(data_dir: Path, dest: Path, files: dict[str, Any]) -> None:
    """The data dir's other top-level files: the push (VAPID) key, password files
    an operator keeps there. Subdirectories other than blobs/ are not copied."""
    for entry in sorted(data_dir.iterdir()):
        name = entry.name
        if name in NOT_FILES or name.startswith(".") or not entry.is_file():
            continue
        rel = f"files/{name}"
        if not _SAFE_PATH.match(rel):
            raise BackupError(f"{entry}: a file name the backup cannot hold; rename or move it")
        files[rel] = dict(zip(("sha256", "size"), copy_hashed(entry, dest / rel), strict=True))


def _pg_dump_binary() -> str:
    found = shutil.which("pg_dump")
    if found is None:
        raise BackupError(
            "pg_dump not found on PATH: install PostgreSQL's client tools (Debian: "
            "postgresql-client) of the server's major version or newer"
        )
    return found


def libpq_url(database_url: str) -> tuple[str, dict[str, str]]:
    """The URL for pg_dump/pg_restore without its password, and the environment
    that carries the password (never on a command line, where `ps` shows it)."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)
    plain = url.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _pg_snapshot(database_url: str, dump: Path) -> tuple[str | None, dict[str, int], set[str]]:
    """pg_dump of one snapshot, and the facts of the same snapshot: a repeatable-read
    transaction exports its snapshot, pg_dump --snapshot dumps exactly it."""
    import anyio

    pg_dump = _pg_dump_binary()
    url, env = libpq_url(database_url)

    async def run() -> tuple[str | None, dict[str, int], set[str]]:
        import asyncpg

        conn = await asyncpg.connect(url, password=env.get("PGPASSWORD"))
        try:
            tr = conn.transaction(isolation="repeatable_read", readonly=True)
            await tr.start()
            snapshot = await conn.fetchval("SELECT pg_export_snapshot()")

            async def query(sql: str) -> list[Any]:
                return list(await conn.fetch(sql))

            tables = {r[0] for r in await query(_PG_TABLES_SQL)}
            revision = None
            if "alembic_version" in tables:
                rows = await query("SELECT version_num FROM alembic_version")
                revision = str(rows[0][0]) if rows else None
            counts = {
                t: int((await query(f"SELECT count(*) FROM {t}"))[0][0])
                for t in COUNTED
                if t in tables
            }
            shas: set[str] = set()
            for t in ("blobs", "attachments"):
                if t in tables:
                    shas |= {str(r[0]) for r in await query(f"SELECT sha256 FROM {t}")}
            os.close(create_private(dump))
            result = await anyio.run_process(
                [pg_dump, "--format=custom", f"--snapshot={snapshot}", "--file", str(dump),
                 "--dbname", url],
                env=env,
                check=False,
            )  # fmt: skip
            if result.returncode != 0:
                raise BackupError(
                    f"pg_dump failed ({result.returncode}): "
                    f"{result.stderr.decode('utf-8', 'replace').strip()[-2000:]}"
                )
            await tr.rollback()
            return revision, counts, shas
        finally:
            await conn.close()

    return anyio.run(run)


def backup(data_dir: Path, dest: Path, database_url: str | None = None) -> BackupReport:
    """Write the backup of the gateway on `data_dir` (running or not) to `dest`,
    which must not exist yet; a temp directory beside it is renamed to it at the end."""
    if dest.exists():
        raise BackupError(f"{dest} exists already: give a new directory")
    if _inside(dest, data_dir):
        raise BackupError(f"{dest} is inside the data dir {data_dir}: give a place outside it")
    if not data_dir.is_dir():
        raise BackupError(f"{data_dir}: no such data dir")
    for attempt in range(1, ATTEMPTS + 1):
        tmp = _temp_beside(dest, "partial")
        try:
            manifest = _backup_into(tmp, data_dir, database_url)
        except _BlobGone as gone:
            shutil.rmtree(tmp, ignore_errors=True)
            if attempt == ATTEMPTS:
                raise BackupError(
                    f"blob {gone.sha256} vanished after each of {ATTEMPTS} snapshots "
                    "(a sweep deleting it each time?); nothing was written"
                ) from None
            continue
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with os.fdopen(create_private(tmp / MANIFEST), "w", encoding="utf-8") as f:
            f.write(manifest.to_json())
            f.flush()
            os.fsync(f.fileno())
        _fsync_tree(tmp)
        try:
            os.rename(tmp, dest)  # fails if dest appeared meanwhile (unless an empty dir)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BackupError(f"{dest}: cannot move the finished backup there: {exc}") from None
        fsync_path(dest.parent)
        return BackupReport(path=dest, manifest=manifest, attempts=attempt)
    raise AssertionError("unreachable")


def _backup_into(tmp: Path, data_dir: Path, database_url: str | None) -> Manifest:
    files: dict[str, Any] = {}
    created_at = now_iso()
    if database_url is None:
        copy = tmp / SQLITE_FILE
        _sqlite_copy(data_dir / SQLITE_FILE, copy)
        revision, counts, shas = _sqlite_facts(copy)
        files[SQLITE_FILE] = dict(zip(("sha256", "size"), sha256_of(copy), strict=True))
        kind = "sqlite"
    else:
        dump = tmp / PG_DUMP_FILE
        revision, counts, shas = _pg_snapshot(database_url, dump)
        files[PG_DUMP_FILE] = dict(zip(("sha256", "size"), sha256_of(dump), strict=True))
        kind = "postgresql"
    _copy_blobs(shas, data_dir / "blobs", tmp, files)  # after the snapshot: see the docstring
    _copy_other_files(data_dir, tmp, files)
    return Manifest(
        database=kind, schema_revision=revision, created_at=created_at, counts=counts, files=files
    )
