"""The read boundary of agents (SPEC §4.6).

One agent often serves many workspaces at once. It may read a session's mail only
if (1) it takes part in that session and (2) the session's workspace equals the
workspace of the session it is working in right now. The workspace comes from the
`session_id` it names as its scope — never from a workspace the caller claims.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import SessionRow
from mailui4agents.errors import not_found
from mailui4agents.services import sessions
from mailui4agents.services.principals import Principal

log = logging.getLogger("mailui4agents.scope")


async def scope_workspace(
    s: AsyncSession, reader: Principal, scope_session_id: str | None
) -> str | None:
    """The workspace an agent may read in, from the session it works in.

    None means "no scope given": allowed for older clients (participation is still
    required), with a warning naming the agent. Humans are not workspace-bound.
    """
    if reader.kind != "agent":
        return None
    if scope_session_id is None:
        log.warning("agent %r read without session_id; workspace isolation not applied",
                    reader.name)  # fmt: skip
        return None
    scope = await s.get(SessionRow, scope_session_id)
    # Naming a session one is not in as one's scope would widen what one may read.
    if scope is None or not await sessions.is_participant(s, scope.id, reader.name):
        raise not_found(f"session '{scope_session_id}'")
    return scope.workspace


async def may_read(
    s: AsyncSession, reader: Principal, target: SessionRow, workspace: str | None
) -> bool:
    """Participant (admins read all) and, for a scoped agent, the same workspace."""
    if workspace is not None and target.workspace != workspace:
        return False
    if reader.is_admin:
        return True
    return await sessions.is_participant(s, target.id, reader.name)


async def require_read(
    s: AsyncSession, reader: Principal, target: SessionRow, scope_session_id: str | None
) -> None:
    """404 — the same as "does not exist" — unless `reader` may read `target`."""
    workspace = await scope_workspace(s, reader, scope_session_id)
    if not await may_read(s, reader, target, workspace):
        raise not_found(f"session '{target.id}'")
