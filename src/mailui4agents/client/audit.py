"""The audit trail calls of the client (docs/api.md, "Audit trail"; docs/audit.md):
`agentmail audit` (cli/audit.py) uses them. People only."""

from __future__ import annotations

from mailui4agents.client.client import AsyncClient
from mailui4agents.client.transport import without_none
from mailui4agents.wire.audit import AuditOut
from mailui4agents.wire.models import Page


async def page(
    client: AsyncClient,
    *,
    session_id: str | None = None,
    agent: str | None = None,
    person: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Page[AuditOut]:
    """One page of decisions, newest first (its `next_cursor` for the next)."""
    params = without_none(
        session_id=session_id, agent=agent, person=person, outcome=outcome, since=since,
        limit=limit, cursor=cursor,
    )  # fmt: skip
    return await client._page("/audit", params, AuditOut)
