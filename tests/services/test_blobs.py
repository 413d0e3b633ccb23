"""The blob store on disk, and the sweep of what no mail needs (with an injected clock)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from mailui4agents.app import start_gateway
from mailui4agents.db.tables import AttachmentRow, BlobRow, MailAttachmentRow, MailRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import TooLarge
from mailui4agents.services import attachments, blobs, scheduler
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import AttachmentRef
from tests.conftest import fast_settings

pytestmark = pytest.mark.anyio

ANA = Principal("user", "ana-id", "ana")
GRACE = timedelta(hours=48)


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    gateway, _ = await start_gateway(fast_settings(tmp_path, attachment_max_bytes=1024))
    try:
        yield gateway
    finally:
        await gateway.db.dispose()


@pytest.fixture
def store(gw: Gateway) -> BlobStore:
    return BlobStore.for_settings(gw.settings)


def blob_path(store: BlobStore, att: AttachmentRef) -> Path:
    """Where `att`'s bytes live (AttachmentRef.sha256 is optional on the wire; the
    gateway always sets it)."""
    assert att.sha256 is not None, att
    return store.path(att.sha256)


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def upload(gw: Gateway, data: bytes, name: str = "notes.txt") -> AttachmentRef:
    writer = BlobStore.for_settings(gw.settings).writer()
    for i in range(0, len(data), 100):
        await writer.write(data[i : i + 100])
    await writer.finish()
    async with gw.write() as s:
        return await attachments.create(s, writer, ANA, filename=name, content_type="text/plain")


async def reference(gw: Gateway, attachment_id: str) -> None:
    """A mail that carries the attachment (rows only: the sweep looks at nothing else)."""
    async with gw.write() as s:
        session = SessionRow(workspace="/srv/shop", created_by="ana")
        s.add(session)
        await s.flush()
        mail = MailRow(
            session_id=session.id, from_name="ana", from_human=True, subject="s", body="b"
        )
        s.add(mail)
        await s.flush()
        s.add(MailAttachmentRow(mail_seq=mail.seq, attachment_id=attachment_id))


async def count(gw: Gateway, table: type[Any]) -> int:
    async with gw.read() as s:
        return int(await s.scalar(select(func.count()).select_from(table)) or 0)


async def sweep(gw: Gateway, store: BlobStore, now: datetime) -> blobs.SweepResult:
    async with gw.write() as s:
        return await blobs.sweep(s, store, now, GRACE)


async def test_a_blob_is_stored_under_its_sha256_with_exactly_the_bytes_written(
    gw: Gateway, store: BlobStore
) -> None:
    data = os.urandom(700)
    att = await upload(gw, data)
    sha = hashlib.sha256(data).hexdigest()
    assert (att.sha256, att.size) == (sha, 700)
    path = store.root / sha[:2] / sha
    assert path.read_bytes() == data
    assert files_under(store.root) == [path]  # and no temp file left behind


async def test_identical_bytes_uploaded_twice_are_stored_as_one_blob(
    gw: Gateway, store: BlobStore
) -> None:
    first = await upload(gw, b"same bytes", name="a.txt")
    second = await upload(gw, b"same bytes", name="b.txt")
    assert first.attachment_id != second.attachment_id
    assert first.sha256 == second.sha256
    assert await count(gw, BlobRow) == 1
    assert await count(gw, AttachmentRow) == 2
    assert len(files_under(store.root)) == 1


async def test_an_empty_file_is_a_blob_too(gw: Gateway, store: BlobStore) -> None:
    att = await upload(gw, b"")
    assert (att.size, att.sha256) == (0, hashlib.sha256(b"").hexdigest())
    assert blob_path(store, att).read_bytes() == b""


async def test_a_write_past_the_limit_is_refused_and_deletes_its_temp_file(
    store: BlobStore,
) -> None:
    writer = store.writer()
    await writer.write(b"x" * 1000)
    assert len(files_under(store.tmp)) == 1
    await writer.write(b"x" * 24)  # exactly the limit (1024) is fine
    with pytest.raises(TooLarge) as refused:
        await writer.write(b"x")
    assert (refused.value.code, refused.value.limit) == ("too_large", 1024)
    assert files_under(store.root) == []


async def test_a_sha_that_is_not_one_never_becomes_a_path(store: BlobStore) -> None:
    for bad in ("../../etc/passwd", "A" * 64, "ab"):
        with pytest.raises(ValueError):
            store.path(bad)


async def test_sweep_removes_an_old_unreferenced_upload_and_its_file(
    gw: Gateway, store: BlobStore
) -> None:
    att = await upload(gw, b"forgotten")
    path = blob_path(store, att)
    result = await sweep(gw, store, utcnow() + GRACE + timedelta(minutes=1))
    assert result == blobs.SweepResult(attachments=1, blobs=1)
    assert not path.exists()
    assert await count(gw, AttachmentRow) == 0
    assert await count(gw, BlobRow) == 0


async def test_sweep_keeps_an_old_upload_that_a_mail_references(
    gw: Gateway, store: BlobStore
) -> None:
    att = await upload(gw, b"sent along")
    await reference(gw, att.attachment_id)
    result = await sweep(gw, store, utcnow() + timedelta(days=365))
    assert result == blobs.SweepResult()
    assert blob_path(store, att).read_bytes() == b"sent along"
    assert await count(gw, AttachmentRow) == 1


async def test_sweep_keeps_a_young_unreferenced_upload(gw: Gateway, store: BlobStore) -> None:
    att = await upload(gw, b"mail still being written")
    result = await sweep(gw, store, utcnow() + GRACE - timedelta(minutes=1))
    assert result == blobs.SweepResult()
    assert blob_path(store, att).exists()


async def test_sweep_keeps_a_blob_that_a_referenced_upload_of_the_same_bytes_uses(
    gw: Gateway, store: BlobStore
) -> None:
    await upload(gw, b"twice", name="unsent.txt")
    kept = await upload(gw, b"twice", name="sent.txt")
    await reference(gw, kept.attachment_id)
    result = await sweep(gw, store, utcnow() + timedelta(days=365))
    assert result == blobs.SweepResult(attachments=1, blobs=0)
    assert blob_path(store, kept).read_bytes() == b"twice"


async def test_an_upload_of_bytes_whose_blob_was_swept_stores_them_again(
    gw: Gateway, store: BlobStore
) -> None:
    old = await upload(gw, b"again")
    await sweep(gw, store, utcnow() + timedelta(days=365))
    assert not blob_path(store, old).exists()
    new = await upload(gw, b"again")
    assert blob_path(store, new).read_bytes() == b"again"
    assert await count(gw, BlobRow) == 1


async def test_temp_files_of_unfinished_uploads_are_swept_only_after_the_grace(
    store: BlobStore,
) -> None:
    store.tmp.mkdir(parents=True)
    (store.tmp / "crashed.part").write_bytes(b"half an upload")
    assert blobs.sweep_temp(store, utcnow(), GRACE) == 0
    assert blobs.sweep_temp(store, utcnow() + GRACE + timedelta(minutes=1), GRACE) == 1
    assert files_under(store.tmp) == []


async def test_the_scheduler_sweep_uses_the_configured_grace(gw: Gateway, store: BlobStore) -> None:
    att = await upload(gw, b"scheduled")
    assert await scheduler.sweep_blobs(gw, now=utcnow()) == blobs.SweepResult()
    later = utcnow() + timedelta(seconds=gw.settings.blob_grace_s + 60)
    assert await scheduler.sweep_blobs(gw, now=later) == blobs.SweepResult(1, 1)
    assert not blob_path(store, att).exists()
