"""Attachment routes: upload (multipart `file`) and download, for humans and agents."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.http import files
from mailui4agents.http.uploads import OPENAPI
from mailui4agents.wire.models import AttachmentRef

router = APIRouter(prefix="/api/v1", tags=["attachments"])


@router.post("/attachments", status_code=201, response_model=AttachmentRef, openapi_extra=OPENAPI)
async def upload(request: Request, who: Human, gw: GatewayDep) -> AttachmentRef:
    """Upload one file (multipart part `file`); mails then reference its id."""
    return await files.upload(request, who, gw)


@router.post(
    "/agent/attachments", status_code=201, response_model=AttachmentRef, openapi_extra=OPENAPI
)
async def agent_upload(request: Request, who: Agent, gw: GatewayDep) -> AttachmentRef:
    """Upload one file (multipart part `file`); mails then reference its id."""
    return await files.upload(request, who, gw)


# The bytes, as stored: their content type is the upload's (any type), never JSON.
BINARY: dict[int | str, JsonObject] = {
    200: {
        "description": "The attachment's bytes, with its stored Content-Type",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get("/attachments/{attachment_id}", response_class=StreamingResponse, responses=BINARY)
async def download(attachment_id: str, who: Human, gw: GatewayDep) -> StreamingResponse:
    """The bytes, to the uploader or anyone who may read a mail carrying them."""
    return await files.download(who, gw, attachment_id, None)


@router.get(
    "/agent/attachments/{attachment_id}", response_class=StreamingResponse, responses=BINARY
)
async def agent_download(
    attachment_id: str, who: Agent, gw: GatewayDep, session_id: str | None = None
) -> StreamingResponse:
    """The bytes, if readable from the session the agent works in (`session_id`)."""
    return await files.download(who, gw, attachment_id, session_id)
