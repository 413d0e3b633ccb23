"""The web UI's "Audit" page (docs/web.md, the page table; docs/audit.md): the decisions
the logged-in person may see, newest first, filtered by session, agent, person
and outcome — the same rows, rule and order as `GET /api/v1/audit`
(services/audit.page_of). It only reads: nothing on it changes a row."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.domain.decided_via import actor_text
from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.times import rfc3339
from mailui4agents.services import audit
from mailui4agents.web import auth
from mailui4agents.web.auth import gateway
from mailui4agents.web.views import _common, _error, _page
from mailui4agents.wire.audit import AuditOut

router = APIRouter(include_in_schema=False)

PAGE = 50
FIELD_CHARS = 200  # a filter longer than any name or id finds nothing anyway


def _row(item: AuditOut) -> dict[str, Any]:
    by = item.decided_by
    return {
        **item.model_dump(),
        "who": actor_text(by.kind, by.name or by.id, by.channel, by.device),
        "waited_s": f"{item.waited_ms / 1000:.1f}",
        "decided_iso": rfc3339(item.decided_at),
    }


@router.get("/audit")
async def audit_page(
    request: Request,
    session: str = "",
    agent: str = "",
    person: str = "",
    outcome: str = "",
    cursor: str = "",
) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    chosen = {
        "session": session.strip()[:FIELD_CHARS],
        "agent": agent.strip()[:FIELD_CHARS],
        "person": person.strip()[:FIELD_CHARS],
        "outcome": outcome.strip()[:FIELD_CHARS],
    }
    filters = audit.Filters(
        chosen["session"] or None,
        chosen["agent"] or None,
        chosen["person"] or None,
        chosen["outcome"] or None,
    )
    gw = gateway(request)
    try:
        async with gw.read() as s:
            items, next_cursor = await audit.page_of(
                s, user.principal, filters, PAGE, cursor[:FIELD_CHARS] or None
            )
    except DomainError as err:
        return _error(request, user, err)
    kept = {k: v for k, v in chosen.items() if v}
    more = f"/audit?{urlencode({**kept, 'cursor': next_cursor})}" if next_cursor else None
    return _page(
        request,
        "audit.html",
        user,
        rows=[_row(item) for item in items],
        chosen=chosen,
        outcomes=audit.OUTCOMES,
        more=more,
        filtered=bool(kept),
        **await _common(request, user),
    )
