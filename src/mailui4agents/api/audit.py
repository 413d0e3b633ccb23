"""The audit trail (docs/audit.md): every decision, read-only. There is no route
that changes or deletes a row, and the database refuses it (migration 0022)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import Limit
from mailui4agents.domain.errors import invalid_value
from mailui4agents.domain.times import parse_rfc3339
from mailui4agents.services import audit
from mailui4agents.wire.audit import AuditOut
from mailui4agents.wire.models import Page

router = APIRouter(prefix="/api/v1", tags=["audit"])

Name = Annotated[str | None, Query(max_length=200)]


@router.get("/audit", response_model=Page[AuditOut], response_model_exclude_unset=True)
async def list_audit(
    who: Human,
    gw: GatewayDep,
    session_id: Annotated[str | None, Query(max_length=36)] = None,
    agent: Name = None,
    person: Name = None,
    outcome: Annotated[str | None, Query(max_length=20)] = None,
    since: Annotated[str | None, Query(max_length=40, description="RFC 3339")] = None,
    limit: Limit = 50,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> Page[AuditOut]:
    """Decisions, newest first: admins see all, everyone else those of the
    sessions they may read; agents none (a person's route). Filters: the
    session, the agent that asked, the person who decided, the outcome, decided
    at or after `since`."""
    filters = audit.Filters(session_id, agent, person, outcome, _since(since))
    async with gw.read() as s:
        items, next_cursor = await audit.page_of(s, who, filters, limit, cursor)
    return page(items, next_cursor)


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = parse_rfc3339(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise invalid_value(
            "since", "since is an RFC 3339 time with its offset, e.g. 2026-12-03T09:00:00Z"
        )
    return when
