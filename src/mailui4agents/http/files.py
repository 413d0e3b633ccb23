"""Attachments over HTTP: an upload read as a stream straight into the blob
store (http/uploads.py), and a download's bytes with the headers that keep a
browser from rendering them. The API (api/attachments.py) and the web UI
(web/data.py) both answer with these."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from starlette.requests import Request
from starlette.responses import StreamingResponse

from mailui4agents.domain.uploads import content_disposition
from mailui4agents.http.uploads import receive_file
from mailui4agents.services import access, attachments
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import AttachmentRef

CHUNK = 64 * 1024


async def upload(request: Request, who: Principal, gw: Gateway) -> AttachmentRef:
    """Store the request's multipart part `file` as `who`'s upload."""
    store = BlobStore.for_settings(gw.settings)
    writer = store.writer()
    try:
        part = await receive_file(request, writer.write, store.max_bytes)
        await writer.finish()
        async with gw.write() as s:
            return await attachments.create(
                s, writer, who, filename=part.filename, content_type=part.content_type
            )
    finally:
        writer.abort()  # a no-op once the blob is in place; else no temp file is left


def _chunks(f: BinaryIO) -> Iterator[bytes]:
    # A sync iterator: Starlette reads it in a worker thread.
    with f:
        while chunk := f.read(CHUNK):
            yield chunk


async def download(
    who: Principal, gw: Gateway, attachment_id: str, session_id: str | None
) -> StreamingResponse:
    """The bytes, if `who` may read them (from `session_id`, for an agent)."""
    async with gw.write() as s:  # a write: the read is logged
        att = await attachments.readable(s, await access.reader(s, who, session_id), attachment_id)
    # Open before answering: once open, a concurrent sweep cannot take the bytes away.
    f = BlobStore.for_settings(gw.settings).open(att.sha256)
    return StreamingResponse(
        _chunks(f),
        media_type=att.content_type,
        headers={
            "Content-Length": str(att.size),
            # Never rendered by a browser: an uploaded text/html must not run as ours.
            "Content-Disposition": content_disposition(att.name),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        },
    )
