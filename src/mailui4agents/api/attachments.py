"""Attachment routes: upload (multipart `file`) and download, for humans and agents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.api.uploads import OPENAPI, receive_file
from mailui4agents.domain.uploads import content_disposition
from mailui4agents.services import access, attachments
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import AttachmentRef

router = APIRouter(prefix="/api/v1", tags=["attachments"])

CHUNK = 64 * 1024


async def _upload(request: Request, who: Principal, gw: Gateway) -> AttachmentRef:
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


async def _download(
    who: Principal, gw: Gateway, attachment_id: str, session_id: str | None
) -> StreamingResponse:
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


@router.post("/attachments", status_code=201, response_model=AttachmentRef, openapi_extra=OPENAPI)
async def upload(request: Request, who: Human, gw: GatewayDep) -> AttachmentRef:
    """Upload one file (multipart part `file`); mails then reference its id."""
    return await _upload(request, who, gw)


@router.post(
    "/agent/attachments", status_code=201, response_model=AttachmentRef, openapi_extra=OPENAPI
)
async def agent_upload(request: Request, who: Agent, gw: GatewayDep) -> AttachmentRef:
    """Upload one file (multipart part `file`); mails then reference its id."""
    return await _upload(request, who, gw)


# The bytes, as stored: their content type is the upload's (any type), never JSON.
BINARY: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The attachment's bytes, with its stored Content-Type",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get("/attachments/{attachment_id}", response_class=StreamingResponse, responses=BINARY)
async def download(attachment_id: str, who: Human, gw: GatewayDep) -> StreamingResponse:
    """The bytes, to the uploader or anyone who may read a mail carrying them."""
    return await _download(who, gw, attachment_id, None)


@router.get(
    "/agent/attachments/{attachment_id}", response_class=StreamingResponse, responses=BINARY
)
async def agent_download(
    attachment_id: str, who: Agent, gw: GatewayDep, session_id: str | None = None
) -> StreamingResponse:
    """The bytes, if readable from the session the agent works in (`session_id`)."""
    return await _download(who, gw, attachment_id, session_id)
