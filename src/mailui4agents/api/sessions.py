"""Human session routes: list, show, rename, change mode, archive."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import Limit, SessionPatch
from mailui4agents.services import permissions, sessions

router = APIRouter(prefix="/api/v1/sessions", tags=["sessions"])


@router.get("")
async def list_sessions(
    who: Human,
    gw: GatewayDep,
    status: Literal["active", "archived"] | None = None,
    workspace: str | None = None,
    q: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    async with gw.read() as s:
        items, nxt = await sessions.list_sessions(s, who, status, workspace, q, limit, cursor)
    return page(items, nxt)


@router.get("/{session_id}")
async def get_session(session_id: str, who: Human, gw: GatewayDep) -> dict[str, Any]:
    async with gw.read() as s:
        await sessions.require_reader(s, session_id, who)
        row = await sessions.get_session(s, session_id)
        return await sessions.describe(s, row, who.name)


@router.patch("/{session_id}")
async def update_session(
    session_id: str, body: SessionPatch, who: Human, gw: GatewayDep
) -> dict[str, Any]:
    async with gw.write() as s:
        out = await sessions.update_session(
            s, who, session_id, body.alias, body.permission_mode, body.archived
        )
        if body.archived:
            # Nothing stays pending in an archived session: its waiters are told now.
            await permissions.cancel_pending(s, session_id, who.name)
            out["pending_permissions"] = 0
        return out
