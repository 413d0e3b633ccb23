"""The blob sweep racing an upload of the same bytes (services/blobs.py), on
SQLite and on PostgreSQL. Transactions on one gateway's engine stand for two
replicas: on PostgreSQL they run on two connections at once; on SQLite the one
writer runs them one after the other, which is how it stays safe.

- an upload that reuses an old unreferenced blob, still uncommitted while a
  sweep runs: the sweep must not delete the file the upload now references;
- a sweep that has deleted the file, still uncommitted while the upload runs:
  the upload must end with a complete file and a row;
- two uploads of the same new bytes at once: both succeed, one blob;
- a mail (or calendar entry) attaching an old unreferenced upload, still
  uncommitted while a sweep runs: the sweep must keep the attachment and its
  bytes (and not fail);
- a sweep that has deleted such an upload, still uncommitted while a mail
  attaches it: the send gets a 400 naming `attachment_ids[0]` (never a 500),
  and nothing of the mail is written.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.api.errors import status_of
from mailui4agents.db.tables import (
    AttachmentRow,
    BlobRow,
    CalendarAttachmentRow,
    CalendarEntryRow,
    MailAttachmentRow,
    MailRow,
    UserRow,
)
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import DomainError, Invalid
from mailui4agents.services import attachments, blobs, calendar, mail
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import AttachmentRef

pytestmark = pytest.mark.anyio

ANA = Principal("user", "ana-id", "ana")
GRACE = timedelta(hours=48)
DATA = b"the same bytes, uploaded again just as the sweep runs"


class WatchedStore(BlobStore):
    """A store whose deletes are seen (`deleted`) and may be held (`hold`): the
    sweep calls delete() in a worker thread, so holding it pauses the sweep
    between deleting a file and deleting its row, inside its transaction."""

    def __init__(self, store: BlobStore, *also: anyio.Event) -> None:
        super().__init__(store.root, store.max_bytes)
        self.deleted = anyio.Event()
        self.also = also  # set too, on the first delete
        self.hold: threading.Event | None = None
        self._token = anyio.lowlevel.current_token()

    def _seen(self) -> None:
        for ev in (self.deleted, *self.also):
            ev.set()

    def delete(self, sha256: str) -> bool:
        ok = super().delete(sha256)
        anyio.from_thread.run_sync(self._seen, token=self._token)
        if self.hold is not None:
            assert self.hold.wait(30)
        return ok


async def written(gw: Gateway, data: bytes) -> blobs.BlobWriter:
    writer = BlobStore.for_settings(gw.settings).writer()
    await writer.write(data)
    await writer.finish()
    return writer


async def old_unreferenced_blob(gw: Gateway) -> str:
    """A blob no attachment uses, older than the grace: the next sweep's prey."""
    writer = await written(gw, DATA)
    async with gw.write() as s:
        await blobs.put(s, writer, utcnow() - 2 * GRACE)
    return writer.sha256


async def upload(s: object, writer: blobs.BlobWriter) -> AttachmentRef:
    return await attachments.create(
        s,  # type: ignore[arg-type]
        writer,
        ANA,
        filename="notes.txt",
        content_type="text/plain",
    )


async def assert_intact(gw: Gateway, store: BlobStore, ref: AttachmentRef) -> None:
    """The attachment's row, its blob's row and the complete file all exist."""
    async with gw.read() as s:
        att = await s.get(AttachmentRow, ref.attachment_id)
        assert att is not None
        assert await s.get(BlobRow, att.sha256) is not None, "the blob row is gone"
    with store.open(att.sha256) as f:  # NotFound if the sweep deleted the file
        assert f.read() == DATA


async def waiting_on_a_lock(gw: Gateway, done: Callable[[], bool]) -> None:
    """Until another connection of this database waits on a lock (PostgreSQL),
    or `done()`. There is no event for "blocked": this polls, with a deadline."""
    with anyio.fail_after(20):
        while not done():
            async with gw.read() as s:
                n = await s.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()"
                    )
                )
            if n:
                return
            await anyio.sleep(0.01)


async def sweep_then_while_it_holds(
    gw: Gateway,
    store: WatchedStore,
    results: list[blobs.SweepResult],
    other: Callable[[], Coroutine[Any, Any, None]],
    done: Callable[[], bool],
) -> None:
    """A sweep that deletes, then holds its transaction open (`store.hold`) while
    `other` starts and waits for it (SQLite: the one writer; PostgreSQL: a row
    lock, seen in pg_stat_activity); then the sweep commits and `other` goes on."""
    hold = store.hold
    assert hold is not None, "the test sets store.hold before the sweep"

    async def sweep() -> None:
        async with gw.write() as s:
            results.append(await blobs.sweep(s, store, utcnow(), GRACE))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep)
            with anyio.fail_after(20):
                await store.deleted.wait()  # deleted, the sweep not committed
            tg.start_soon(other)
            if not gw.db.is_sqlite:
                await waiting_on_a_lock(gw, done=done)
            hold.set()
    finally:
        hold.set()


async def test_a_sweep_during_an_upload_that_reuses_the_blob_keeps_its_file(
    gw: Gateway,
) -> None:
    sha = await old_unreferenced_blob(gw)
    moved = anyio.Event()  # the sweep ended, or deleted a file
    store = WatchedStore(BlobStore.for_settings(gw.settings), moved)
    writer = await written(gw, DATA)
    outcome: list[BaseException | blobs.SweepResult] = []

    async def sweep() -> None:
        try:
            async with gw.write() as s:
                outcome.append(await blobs.sweep(s, store, utcnow(), GRACE))
        except Exception as e:  # a sweep may fail; the upload's bytes must not
            outcome.append(e)
        moved.set()

    async with anyio.create_task_group() as tg, gw.write() as s:
        ref = await upload(s, writer)  # reuses the old blob; not committed yet
        tg.start_soon(sweep)
        if not gw.db.is_sqlite:
            with anyio.fail_after(20):  # another replica's sweep runs now
                await moved.wait()
        # The upload committed (SQLite: the sweep ran only now, after it).
    assert ref.sha256 == sha
    await assert_intact(gw, store, ref)
    assert not store.deleted.is_set(), outcome  # the blob was in use: never a candidate


async def test_an_upload_during_a_sweep_that_deleted_the_blob_stores_it_again(
    gw: Gateway,
) -> None:
    await old_unreferenced_blob(gw)
    store = WatchedStore(BlobStore.for_settings(gw.settings))
    store.hold = threading.Event()
    writer = await written(gw, DATA)
    refs: list[AttachmentRef] = []
    results: list[blobs.SweepResult] = []

    async def upload_now() -> None:
        async with gw.write() as s:
            refs.append(await upload(s, writer))

    # The sweep never fails for the race (no FK violation): results gets its one.
    await sweep_then_while_it_holds(gw, store, results, upload_now, done=lambda: bool(refs))
    assert [r.blobs for r in results] == [1]
    [ref] = refs
    await assert_intact(gw, store, ref)


async def test_two_uploads_of_the_same_new_bytes_at_once_both_succeed(gw: Gateway) -> None:
    one, two = await written(gw, DATA), await written(gw, DATA)
    refs: list[AttachmentRef] = []

    async def second() -> None:
        async with gw.write() as s:
            refs.append(await upload(s, two))

    async with anyio.create_task_group() as tg, gw.write() as s:
        refs.append(await upload(s, one))  # a new blob row, not committed yet
        tg.start_soon(second)
        if not gw.db.is_sqlite:
            await waiting_on_a_lock(gw, done=lambda: bool(refs[1:]))
    assert len(refs) == 2 and refs[0].sha256 == refs[1].sha256
    store = BlobStore.for_settings(gw.settings)
    for ref in refs:
        await assert_intact(gw, store, ref)
    async with gw.read() as s:
        assert await s.scalar(select(func.count()).select_from(BlobRow)) == 1


# --- a mail attaching an old upload that no mail references yet ---------------


async def old_unreferenced_attachment(gw: Gateway) -> AttachmentRef:
    """Ana's upload of two days ago that no mail uses: the next sweep's prey."""
    writer = await written(gw, DATA)
    old = utcnow() - 2 * GRACE
    async with gw.write() as s:
        s.add_all(UserRow(id=f"{n}-id", username=n, password_hash="-") for n in ("ana", "bob"))
        ref = await upload(s, writer)
        await s.execute(
            update(AttachmentRow)
            .where(AttachmentRow.id == ref.attachment_id)
            .values(created_at=old)
        )
        await s.execute(update(BlobRow).where(BlobRow.sha256 == ref.sha256).values(created_at=old))
    return ref


async def send_mail(gw: Gateway, s: AsyncSession, ref: AttachmentRef) -> None:
    await mail.send_mail(
        s,
        gw.settings,
        ANA,
        to=["bob@/srv/shop.new"],
        cc=[],
        subject="the notes",
        body="attached",
        attachment_ids=[ref.attachment_id],
    )


async def schedule_mail(gw: Gateway, s: AsyncSession, ref: AttachmentRef) -> None:
    draft = calendar.Draft(
        to=["bob@/srv/shop.new"],
        cc=[],
        subject="the notes",
        body="attached",
        start_at=(utcnow() + timedelta(days=1)).isoformat(),
        timezone="UTC",
        rrule=None,
        attachment_ids=[ref.attachment_id],
    )
    await calendar.create(s, gw.settings, ANA, draft)


Attach = Callable[[Gateway, AsyncSession, AttachmentRef], Awaitable[None]]
ATTACHES = pytest.mark.parametrize("attach", [send_mail, schedule_mail], ids=["mail", "calendar"])


async def links(gw: Gateway) -> list[str]:
    """The attachment ids that mails and calendar entries reference."""
    async with gw.read() as s:
        return [
            *await s.scalars(select(MailAttachmentRow.attachment_id)),
            *await s.scalars(select(CalendarAttachmentRow.attachment_id)),
        ]


@ATTACHES
async def test_a_sweep_during_a_send_that_attaches_an_old_upload_keeps_it(
    gw: Gateway, attach: Attach
) -> None:
    ref = await old_unreferenced_attachment(gw)
    moved = anyio.Event()  # the sweep ended, or deleted a file
    store = WatchedStore(BlobStore.for_settings(gw.settings), moved)
    outcome: list[BaseException | blobs.SweepResult] = []

    async def sweep() -> None:
        try:
            async with gw.write() as s:
                outcome.append(await blobs.sweep(s, store, utcnow(), GRACE))
        except Exception as e:  # a failed sweep is a red test, seen below
            outcome.append(e)
        moved.set()

    async with anyio.create_task_group() as tg, gw.write() as s:
        await attach(gw, s, ref)  # checked and linked, not committed yet
        await s.flush()
        tg.start_soon(sweep)  # another replica's sweep runs now
        if not gw.db.is_sqlite:  # it ends, or waits for this send
            await waiting_on_a_lock(gw, done=moved.is_set)
        # The send commits (SQLite: the sweep runs only now, after it).
    assert outcome == [blobs.SweepResult(attachments=0, blobs=0)], outcome
    assert await links(gw) == [ref.attachment_id]
    await assert_intact(gw, store, ref)
    assert not store.deleted.is_set()


@ATTACHES
async def test_a_send_during_a_sweep_that_deleted_the_upload_is_refused_naming_the_field(
    gw: Gateway, attach: Attach
) -> None:
    ref = await old_unreferenced_attachment(gw)
    store = WatchedStore(BlobStore.for_settings(gw.settings))
    store.hold = threading.Event()
    results: list[blobs.SweepResult] = []
    refused: list[DomainError] = []

    async def attach_now() -> None:
        try:
            async with gw.write() as s:
                await attach(gw, s, ref)
        except DomainError as e:  # anything else (an IntegrityError: a 500) fails the test
            refused.append(e)

    await sweep_then_while_it_holds(gw, store, results, attach_now, done=lambda: bool(refused))
    assert results == [blobs.SweepResult(attachments=1, blobs=1)]
    [err] = refused
    assert isinstance(err, Invalid) and status_of(err) == 400
    assert err.body()["error"]["field"] == "attachment_ids[0]"
    assert ref.attachment_id in err.message
    async with gw.read() as s:  # nothing of the refused mail or entry was written
        assert await s.scalar(select(func.count()).select_from(MailRow)) == 0
        assert await s.scalar(select(func.count()).select_from(CalendarEntryRow)) == 0
    assert await links(gw) == []
