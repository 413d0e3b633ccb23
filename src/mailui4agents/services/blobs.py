"""The content-addressed blob store: bytes on disk under their sha256.

Layout: `<data_dir>/blobs/<first 2 hex>/<sha256>`, plus `<data_dir>/blobs/tmp/` for
uploads in progress (same file system, so the final rename is atomic). A blob
file is complete or absent, never half written: it is streamed to a temp file
while hashed and counted, fsynced, then renamed into place.

Files are placed and deleted only inside a write transaction (`put`, `sweep`).
On SQLite that serialises them, so a sweep can never delete a file that an upload
has just placed and is about to reference. On PostgreSQL several replicas write
at once, so the blob's row is the lock (docs/postgres.md): an upload holds it
FOR SHARE from before it looks at the file until it commits; a sweep locks its
candidates FOR UPDATE SKIP LOCKED (a blob an upload is reusing is skipped) and
checks them again once locked, before deleting any file. Each waits for the
other, never both: the file is deleted only while no upload can place or reuse
it, and an upload that waited finds the row gone and places the file anew.
Identical new bytes uploaded at once insert their row ON CONFLICT DO NOTHING.
An attachment is guarded the same way against a send (or calendar entry) that
attaches it: the send holds its row FOR SHARE from its check until it commits
(services/attachments.py, check_for_send); the sweep skips locked attachments
and checks the rest again once locked, so a send that waited finds the row gone
and is refused with a 400 naming `attachment_ids[i]`, never a 500.
On SQLite the locks are no-ops.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

import anyio.to_thread
from sqlalchemy import Select, delete, exists, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from mailui4agents.db.tables import (
    AttachmentRow,
    BlobRow,
    CalendarAttachmentRow,
    CalendarEntryRow,
    MailAttachmentRow,
)
from mailui4agents.domain.errors import TooLarge, not_found
from mailui4agents.private_files import create_private, fsync_path, private_dir
from mailui4agents.settings import Settings

log = logging.getLogger("mailui4agents.blobs")

# Calendar statuses whose entries still hold their attachments (docs/behaviour.md#calendar).
CALENDAR_HOLDS = ("scheduled", "failed")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"the file is larger than the limit of {limit} bytes", limit=limit)


class BlobStore:
    """Where blobs live, and how big one may be."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.tmp = root / "tmp"

    @classmethod
    def for_settings(cls, settings: Settings) -> BlobStore:
        return cls(settings.data_dir / "blobs", settings.attachment_max_bytes)

    def path(self, sha256: str) -> Path:
        # Only ever a hash from our own rows; checked anyway so it can never be a path.
        if not _SHA256.match(sha256):
            raise ValueError(f"not a sha256: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def writer(self) -> BlobWriter:
        return BlobWriter(self)

    def open(self, sha256: str) -> BinaryIO:
        """The blob for reading; NotFound if its file is gone."""
        try:
            return self.path(sha256).open("rb")
        except FileNotFoundError:
            raise not_found(f"blob '{sha256}'") from None

    def delete(self, sha256: str) -> bool:
        """Remove the blob's file; False if that failed (the row must then stay)."""
        try:
            self.path(sha256).unlink(missing_ok=True)
        except OSError:
            log.exception("cannot delete blob %s", sha256)
            return False
        return True


class BlobWriter:
    """One upload in progress: a temp file, a running hash and a byte count."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.size = 0
        self.sha256 = ""
        self._hash = hashlib.sha256()
        self._temp: Path | None = None
        self._file: BinaryIO | None = None

    async def write(self, chunk: bytes) -> None:
        """Append; past the size limit the temp file is deleted and TooLarge raised."""
        if not chunk:
            return
        self.size += len(chunk)
        if self.size > self.store.max_bytes:
            self.abort()
            raise too_large(self.store.max_bytes)
        self._hash.update(chunk)
        await anyio.to_thread.run_sync(self._write, chunk)

    def _write(self, chunk: bytes) -> None:
        if self._file is None:
            private_dir(self.store.tmp)
            self._temp = self.store.tmp / f"{uuid.uuid4().hex}.part"
            self._file = os.fdopen(create_private(self._temp), "wb")
        self._file.write(chunk)

    async def finish(self) -> str:
        """Flush and fsync the temp file; returns the sha256 of what was written."""
        await anyio.to_thread.run_sync(self._finish)
        self.sha256 = self._hash.hexdigest()
        return self.sha256

    def _finish(self) -> None:
        if self._file is None:  # an empty file: nothing was written yet
            self._write(b"")
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def place(self) -> None:
        """Move the temp file to its content address (idempotent: if the blob is
        already there, the identical temp copy is dropped)."""
        assert self.sha256 and self._temp is not None, "finish() first"
        final = self.store.path(self.sha256)
        if final.exists():
            self.abort()
            return
        private_dir(final.parent)
        os.replace(self._temp, final)
        self._temp = None
        fsync_path(final.parent)

    def abort(self) -> None:
        """Forget the upload: close and delete the temp file (safe to call twice)."""
        if self._file is not None and not self._file.closed:
            self._file.close()
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
            self._temp = None


def _locked_row(sha256: str) -> Select[BlobRow]:
    """The blob's row, held FOR SHARE until the transaction ends: a sweep cannot
    lock it (it skips it) and waits for no one (module docstring)."""
    return (
        select(BlobRow)
        .where(BlobRow.sha256 == sha256)
        .with_for_update(read=True)
        .execution_options(populate_existing=True)
    )


async def put(s: AsyncSession, writer: BlobWriter, now: datetime) -> BlobRow:
    """Place a finished upload and make sure its row exists (inside a write
    transaction, see the module docstring). Identical bytes are stored once.

    The row is locked before the file is looked at, so a sweep on another
    replica either finished deleting both (the file is placed anew here) or
    cannot start on this blob until this transaction ends."""
    row = await s.scalar(_locked_row(writer.sha256))
    await anyio.to_thread.run_sync(writer.place)
    if row is None:
        values = {"sha256": writer.sha256, "size": writer.size, "created_at": now}
        insert = sqlite_insert if s.get_bind().dialect.name == "sqlite" else pg_insert
        # Another upload of the same new bytes may insert it first: then keep its row.
        await s.execute(insert(BlobRow).values(**values).on_conflict_do_nothing())
        row = await s.scalar(_locked_row(writer.sha256))
        assert row is not None  # inserted here, or committed by the other upload
    return row


@dataclass(frozen=True)
class SweepResult:
    attachments: int = 0
    blobs: int = 0


def _unreferenced_attachments(cutoff: datetime) -> Select[str]:
    used = exists().where(MailAttachmentRow.attachment_id == AttachmentRow.id)
    # A calendar entry that may still send it (scheduled, or failed and waiting to
    # be fixed) holds it, however long after its upload; done and cancelled ones do not.
    scheduled = exists().where(
        CalendarAttachmentRow.attachment_id == AttachmentRow.id,
        CalendarAttachmentRow.entry_id == CalendarEntryRow.id,
        CalendarEntryRow.status.in_(CALENDAR_HOLDS),
    )
    return select(AttachmentRow.id).where(AttachmentRow.created_at < cutoff, ~used, ~scheduled)


def _unreferenced_blobs(cutoff: datetime) -> Select[str]:
    used = exists().where(AttachmentRow.sha256 == BlobRow.sha256)
    return select(BlobRow.sha256).where(BlobRow.created_at < cutoff, ~used)


async def anything_to_sweep(s: AsyncSession, now: datetime, grace: timedelta) -> bool:
    """A cheap read-only check, so an idle gateway never takes the write lock."""
    cutoff = now - grace
    for stmt in (_unreferenced_attachments(cutoff), _unreferenced_blobs(cutoff)):
        if await s.scalar(stmt.limit(1)) is not None:
            return True
    return False


async def _locked_again(
    s: AsyncSession, key: InstrumentedAttribute[str], keys: list[str], unreferenced: Select[str]
) -> list[str]:
    """Of the candidates `keys`, those this sweep could lock FOR UPDATE (skipping
    any a send or an upload holds) and that are still unreferenced, checked again
    by a statement that sees what committed before the locks were taken."""
    locked = select(key).where(key.in_(keys)).with_for_update(skip_locked=True)
    held = list((await s.scalars(locked)).all())
    if not held:
        return []
    return list((await s.scalars(unreferenced.where(key.in_(held)))).all())


async def sweep(s: AsyncSession, store: BlobStore, now: datetime, grace: timedelta) -> SweepResult:
    """Delete what no mail needs any more and is older than `grace`.

    First attachments that no mail references, then blobs that no attachment
    references (file first, then row; a file that cannot be deleted keeps its
    row). The grace period lets an upload live until the mail that will reference
    it is sent. Attachments of calendar entries that may still send them count as
    references (CALENDAR_HOLDS); done and cancelled entries let theirs go.
    """
    cutoff = now - grace
    unused = _unreferenced_attachments(cutoff)
    att_ids = list((await s.scalars(unused)).all())
    if att_ids:  # a send or calendar entry attaching one holds it: skipped
        att_ids = await _locked_again(s, AttachmentRow.id, att_ids, unused)
    if att_ids:
        await s.execute(
            delete(CalendarAttachmentRow).where(CalendarAttachmentRow.attachment_id.in_(att_ids))
        )
        await s.execute(delete(AttachmentRow).where(AttachmentRow.id.in_(att_ids)))
    shas = list((await s.scalars(_unreferenced_blobs(cutoff))).all())
    if shas:  # an upload reusing one holds it: skipped
        shas = await _locked_again(s, BlobRow.sha256, shas, _unreferenced_blobs(cutoff))
    gone = [sha for sha in shas if await anyio.to_thread.run_sync(store.delete, sha)]
    if gone:
        await s.execute(delete(BlobRow).where(BlobRow.sha256.in_(gone)))
    return SweepResult(attachments=len(att_ids), blobs=len(gone))


def sweep_temp(store: BlobStore, now: datetime, grace: timedelta) -> int:
    """Delete temp files older than `grace`: uploads that never finished (the
    process was killed mid-upload). Files only, no database; returns the count."""
    cutoff = now - grace
    n = 0
    with contextlib.suppress(FileNotFoundError):
        for path in store.tmp.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if datetime.fromtimestamp(path.stat().st_mtime, UTC) < cutoff:
                    path.unlink()
                    n += 1
    return n
