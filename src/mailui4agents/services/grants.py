"""Standing grants: an "always" approval that later matching requests of the same
session are approved by (docs/behaviour.md#approval-round-trip). Made by
services/permission_decisions.py; listed and revoked here.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import GrantRow, SessionDeciderRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import not_found
from mailui4agents.domain.grants import EVERY, EXACT, GrantRule, covers
from mailui4agents.services import access
from mailui4agents.services.principals import Principal
from mailui4agents.services.session_summary import get_session
from mailui4agents.wire.models import GrantOut

HIDDEN_INPUT = "exactly the input that was approved (shown to the session's deciders)"


def grant_out(g: GrantRow, *, decider: bool = True) -> GrantOut:
    """`decider`: the reader decides in the grant's session. An exact grant's
    pattern *is* the approved input (a command, a path, a tool's whole input),
    which only the session's deciders see (docs/behaviour.md, "Who sees a
    request's input"); other readers learn that it exists and what kind it is."""
    hidden = g.scope == EXACT and not decider
    pattern = None if hidden else g.pattern
    return GrantOut(
        id=g.id,
        session_id=g.session_id,
        tool_name=g.tool_name,
        pattern=pattern,
        scope=g.scope,
        covers=HIDDEN_INPUT if hidden else covers(GrantRule(g.tool_name, g.pattern, g.scope)),
        # Pattern-less and "every": made before migration 0013 (a new one says `*`).
        legacy_every_input=g.scope == EVERY and g.pattern is None,
        created_by=g.created_by,
        request_id=g.request_id,
        created_at=g.created_at,
        revoked_at=g.revoked_at,
    )


async def list_grants(
    s: AsyncSession, human: Principal, session_id: str | None, *, include_revoked: bool
) -> list[GrantOut]:
    # One query, not one participant lookup per grant.
    stmt = select(GrantRow).where(GrantRow.session_id.in_(access.Reader(human).readable_ids()))
    if session_id is not None:
        stmt = stmt.where(GrantRow.session_id == session_id)
    if not include_revoked:
        stmt = stmt.where(GrantRow.revoked_at.is_(None))
    rows = (await s.scalars(stmt.order_by(GrantRow.created_at))).all()
    mine = (
        set(
            (
                await s.scalars(
                    select(SessionDeciderRow.session_id).where(
                        SessionDeciderRow.name == human.name,
                        SessionDeciderRow.session_id.in_({g.session_id for g in rows}),
                    )
                )
            ).all()
        )
        if rows
        else set()
    )
    return [grant_out(g, decider=g.session_id in mine) for g in rows]


async def revoke_grant(s: AsyncSession, human: Principal, grant_id: str) -> GrantOut:
    g = await s.get(GrantRow, grant_id)
    if g is None:
        raise not_found(f"grant '{grant_id}'")
    if not human.is_admin:
        # Admins may revoke any grant: revoking only takes power away (docs/access.md).
        session = await get_session(s, g.session_id)
        await access.Reader(human).ensure_decide(s, session, f"grant '{grant_id}'")
    if g.revoked_at is None:
        g.revoked_at = utcnow()
        await s.flush()
    decides = await s.get(SessionDeciderRow, (g.session_id, human.name)) is not None
    return grant_out(g, decider=decides)
