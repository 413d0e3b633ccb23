"""Human session routes: list, show, rename, change mode, archive."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import Limit, NameIn, SessionPatch
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.uploads import content_disposition
from mailui4agents.services import email_export, sessions
from mailui4agents.wire.models import DeciderOut, Page, SessionOut

router = APIRouter(prefix="/api/v1/sessions", tags=["sessions"])


@router.get("", response_model=Page[SessionOut], response_model_exclude_unset=True)
async def list_sessions(
    who: Human,
    gw: GatewayDep,
    status: Literal["active", "archived"] | None = None,
    workspace: str | None = None,
    q: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> Page[SessionOut]:
    async with gw.read() as s:
        items, nxt = await sessions.list_sessions(s, who, status, workspace, q, limit, cursor)
    return page(items, nxt)


@router.get("/{session_id}", response_model=SessionOut, response_model_exclude_unset=True)
async def get_session(session_id: str, who: Human, gw: GatewayDep) -> SessionOut:
    async with gw.read() as s:
        return await sessions.show_session(s, who, session_id)


MBOX: dict[int | str, JsonObject] = {
    200: {
        "description": "Every mail of the session as an RFC 5322 message, oldest first",
        "content": {"application/mbox": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get("/{session_id}/export", response_class=StreamingResponse, responses=MBOX)
async def export_session(
    session_id: str,
    who: Human,
    gw: GatewayDep,
    export_format: Literal["mbox"] = Query("mbox", alias="format"),
) -> StreamingResponse:
    """The session as real mail (docs/email.md, "Export"): the Message-IDs and
    threading headers of its e-mails, attachments as MIME parts."""
    await email_export.check(gw, who, session_id)  # 404 before anything streams
    return StreamingResponse(
        email_export.mbox(gw, who, session_id),
        media_type="application/mbox",
        headers={
            "Content-Disposition": content_disposition(f"session-{session_id}.{export_format}"),
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.patch("/{session_id}", response_model=SessionOut, response_model_exclude_unset=True)
async def update_session(
    session_id: str, body: SessionPatch, who: Human, gw: GatewayDep
) -> SessionOut:
    async with gw.write() as s:
        return await sessions.update_session(
            s, who, session_id, body.alias, body.permission_mode, body.archived
        )


@router.get(
    "/{session_id}/deciders", response_model=Page[DeciderOut], response_model_exclude_unset=True
)
async def list_deciders(session_id: str, who: Human, gw: GatewayDep) -> Page[DeciderOut]:
    """Who may decide requests and change the mode: owners and named deciders."""
    async with gw.read() as s:
        return page(await sessions.list_deciders(s, who, session_id), None)


@router.post(
    "/{session_id}/deciders",
    status_code=201,
    response_model=Page[DeciderOut],
    response_model_exclude_unset=True,
)
async def add_decider(
    session_id: str, body: NameIn, who: Human, gw: GatewayDep
) -> Page[DeciderOut]:
    """An owner names another person who may decide (owners only)."""
    async with gw.write() as s:
        items = await sessions.change_deciders(s, who, session_id, add=body.name, remove=None)
    return page(items, None)


@router.delete(
    "/{session_id}/deciders/{name}",
    response_model=Page[DeciderOut],
    response_model_exclude_unset=True,
)
async def remove_decider(
    session_id: str, name: str, who: Human, gw: GatewayDep
) -> Page[DeciderOut]:
    async with gw.write() as s:
        items = await sessions.change_deciders(s, who, session_id, add=None, remove=name)
    return page(items, None)
