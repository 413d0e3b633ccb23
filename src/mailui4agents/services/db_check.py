"""`agentmail db check`: is this database fit to run on (docs/behaviour.md#operations)?

Read-only, so it may run beside a running gateway. It reports:

- the schema: the database's revision against this version's (`db/migrate.py`):
  current, behind (migrated at the next start), newer (refused at start), or none;
- the size on disk (SQLite: the file and its WAL; PostgreSQL: `pg_database_size`);
- integrity: SQLite's `PRAGMA integrity_check` and `PRAGMA foreign_key_check`;
  PostgreSQL keeps no such check of its own: the `amcheck` extension's
  `bt_index_check` on our indexes when the extension is installed, else "not checked"
  (never "ok" for a check that did not run);
- orphans, on both: a blob row whose file is gone (an attachment that can no longer
  be read), a blob file no row names (disk the sweep will never free), an attachment
  over a missing blob row, a mail's attachment link to a missing attachment.

Each finding is bounded (the first `SHOWN` names and a count), so a broken
database of millions of rows gives a short report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Select, exists, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.db.tables import AttachmentRow, BlobRow, MailAttachmentRow
from mailui4agents.services.blobs import BlobStore

SHOWN = 20  # names listed per finding; the count is always whole
PG_UNCHECKED = "not checked (PostgreSQL: the amcheck extension is not installed)"


@dataclass
class Finding:
    """One kind of problem: how many, and the first few of them."""

    what: str
    count: int
    examples: list[str] = field(default_factory=list)


@dataclass
class Report:
    backend: str
    revision: str | None
    head: str
    schema: str  # current | behind | newer | none
    size_bytes: int
    integrity: str  # ok | not checked (…) | the first problems
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return (
            self.schema in ("current", "behind")
            and not self.findings
            and (self.integrity == "ok" or self.integrity.startswith("not checked"))
        )


def schema_state(revision: str | None) -> str:
    if revision is None:
        return "none"
    if revision == migrate.HEAD:
        return "current"
    if revision in migrate.known_revisions():
        return "behind"
    return "newer"


async def check(url: str, store: BlobStore) -> Report:
    db = Database(url)
    try:
        revision = await migrate.current_revision(db)
        async with db.reader.connect() as conn:
            backend = conn.dialect.name
            report = Report(
                backend=backend,
                revision=revision,
                head=migrate.HEAD,
                schema=schema_state(revision),
                size_bytes=await _size(conn, url),
                integrity=await _integrity(conn),
            )
            if revision is not None:
                report.findings = await _orphans(conn, store)
        return report
    finally:
        await db.dispose()


async def _size(conn: AsyncConnection, url: str) -> int:
    if conn.dialect.name == "postgresql":
        found = await conn.scalar(text("SELECT pg_database_size(current_database())"))
        return int(found or 0)
    path = url.split(":///", 1)[1]
    return await conn.run_sync(lambda _: _file_sizes(path))


def _file_sizes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


async def _integrity(conn: AsyncConnection) -> str:
    if conn.dialect.name == "sqlite":
        rows = (await conn.execute(text("PRAGMA integrity_check"))).scalars().all()
        problems = [str(r) for r in rows if r != "ok"]
        fk = (await conn.execute(text("PRAGMA foreign_key_check"))).all()
        problems += [f"foreign key: {r[0]} row {r[1]} → {r[2]}" for r in fk]
        return "ok" if not problems else "; ".join(problems[:SHOWN])
    has_amcheck = await conn.scalar(text("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'"))
    if not has_amcheck:
        return PG_UNCHECKED
    indexes = (
        await conn.execute(
            text(
                "SELECT c.oid::regclass::text FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE a.amname = 'btree' AND n.nspname = current_schema()"
            )
        )
    ).scalars()
    for name in indexes:
        await conn.execute(text("SELECT bt_index_check(CAST(:i AS regclass))"), {"i": name})
    return "ok"  # bt_index_check raises on the first corrupt index


async def _orphans(conn: AsyncConnection, store: BlobStore) -> list[Finding]:
    findings: list[Finding] = []

    async def rows(what: str, stmt: Select[str]) -> None:
        names = [str(n) for n in (await conn.execute(stmt)).scalars()]
        if names:
            findings.append(Finding(what, len(names), names[:SHOWN]))

    await rows(
        "attachments over a missing blob row",
        select(AttachmentRow.id).where(~exists().where(BlobRow.sha256 == AttachmentRow.sha256)),
    )
    await rows(
        "mail attachment links to a missing attachment",
        select(MailAttachmentRow.attachment_id).where(
            ~exists().where(AttachmentRow.id == MailAttachmentRow.attachment_id)
        ),
    )
    known = set((await conn.execute(select(BlobRow.sha256))).scalars())
    on_disk = await conn.run_sync(lambda _: _blob_files(store.root))
    missing = sorted(known - on_disk)
    stray = sorted(on_disk - known)
    if missing:
        findings.append(Finding("blob rows whose file is gone", len(missing), missing[:SHOWN]))
    if stray:
        findings.append(Finding("blob files no row names", len(stray), stray[:SHOWN]))
    return findings


def _blob_files(root: Path) -> set[str]:
    """The hashes of `<root>/<2 hex>/<sha256>` files; uploads in progress (tmp/) are not
    blobs yet."""
    if not root.is_dir():
        return set()
    found: set[str] = set()
    for sub in root.iterdir():
        if sub.name == "tmp" or not sub.is_dir():
            continue
        found.update(p.name for p in sub.iterdir() if p.is_file())
    return found
