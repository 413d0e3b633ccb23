"""Calendar routes: schedule mail, list, read, edit, cancel (docs/api.md, "Calendar").

The same routes serve humans under /api/v1/calendar and agents under
/api/v1/agent/calendar (agents never reach human routes); only the creator of an
entry sees it, and admins (docs/access.md, "Calendar").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from mailui4agents.api.deps import GatewayDep, agent, human
from mailui4agents.api.schemas import Limit, Mode
from mailui4agents.api.validation import Id, StrictBody
from mailui4agents.services import calendar
from mailui4agents.services.principals import Principal
from mailui4agents.wire.calendar import CalendarEntryOut
from mailui4agents.wire.models import Page

Status = Literal["scheduled", "done", "cancelled", "failed"]


class CalendarCreate(StrictBody):
    """Mail to send at `start_at` (ISO 8601; without an offset it is wall-clock
    time in `timezone`), repeated by `rrule` (RFC 5545, e.g. "FREQ=DAILY;COUNT=5").
    `permission_mode`: humans only, when the mail creates a session.
    `from_session_id`: agents only, the session they work in (their read scope)."""

    to: list[str]
    cc: list[str] = []
    subject: str
    body: str
    start_at: str
    timezone: str = "UTC"
    rrule: str | None = None
    attachment_ids: list[Id] = []
    permission_mode: Mode | None = None
    from_session_id: Id | None = None


class CalendarPatch(StrictBody):
    """Only the fields given change; `rrule: null` makes the entry one-off.
    `status`: "cancelled", or "scheduled" to retry a failed entry."""

    to: list[str] | None = None
    cc: list[str] | None = None
    subject: str | None = None
    body: str | None = None
    start_at: str | None = None
    timezone: str | None = None
    rrule: str | None = None
    attachment_ids: list[Id] | None = None
    permission_mode: Mode | None = None
    from_session_id: Id | None = None
    status: Literal["scheduled", "cancelled"] | None = None


# Fields that may be given as null to clear them; null elsewhere means "unchanged".
_NULLABLE = {"rrule", "permission_mode", "from_session_id"}


def _draft(body: CalendarCreate) -> calendar.Draft:
    return calendar.Draft(
        to=body.to,
        cc=body.cc,
        subject=body.subject,
        body=body.body,
        start_at=body.start_at,
        timezone=body.timezone,
        rrule=body.rrule,
        attachment_ids=[str(i) for i in body.attachment_ids],
        permission_mode=body.permission_mode,
        from_session_id=str(body.from_session_id) if body.from_session_id else None,
    )


def _changes(body: CalendarPatch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in body.model_fields_set:
        value = getattr(body, name)
        if value is None and name not in _NULLABLE:
            continue
        if name == "attachment_ids":
            value = [str(i) for i in value]
        elif name == "from_session_id" and value is not None:
            value = str(value)
        out[name] = value
    return out


def _router(prefix: str, caller: Any, tag: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=[tag])
    # A default, not an Annotated alias: this module's annotations are strings,
    # and FastAPI cannot resolve a name local to this function from them.
    who_dep = Depends(caller)

    @router.post("", status_code=201, response_model=CalendarEntryOut)
    async def schedule_mail(
        body: CalendarCreate, gw: GatewayDep, who: Principal = who_dep
    ) -> CalendarEntryOut:
        async with gw.write() as s:
            return await calendar.create(s, gw.settings, who, _draft(body))

    @router.get("", response_model=Page[CalendarEntryOut])
    async def list_calendar(
        gw: GatewayDep,
        status: Status | None = None,
        everyone: Annotated[bool, Query(description="admins: every creator's entries")] = False,
        limit: Limit = 50,
        cursor: str | None = None,
        who: Principal = who_dep,
    ) -> Page[CalendarEntryOut]:
        """Upcoming first: scheduled entries by next due time, then the rest."""
        async with gw.read() as s:
            items, nxt = await calendar.list_entries(
                s, who, status=status, everyone=everyone, limit=limit, cursor=cursor
            )
        return Page[CalendarEntryOut](items=items, next_cursor=nxt)

    @router.get("/{entry_id}", response_model=CalendarEntryOut)
    async def get_entry(
        entry_id: str, gw: GatewayDep, who: Principal = who_dep
    ) -> CalendarEntryOut:
        async with gw.read() as s:
            return await calendar.get(s, who, entry_id)

    @router.patch("/{entry_id}", response_model=CalendarEntryOut)
    async def edit_entry(
        entry_id: str, body: CalendarPatch, gw: GatewayDep, who: Principal = who_dep
    ) -> CalendarEntryOut:
        async with gw.write() as s:
            return await calendar.update(s, gw.settings, who, entry_id, _changes(body))

    @router.post("/{entry_id}/cancel", response_model=CalendarEntryOut)
    async def cancel_entry(
        entry_id: str, gw: GatewayDep, who: Principal = who_dep
    ) -> CalendarEntryOut:
        async with gw.write() as s:
            return await calendar.cancel(s, who, entry_id)

    return router


router = _router("/api/v1/calendar", human, "calendar")
agent_router = _router("/api/v1/agent/calendar", agent, "calendar")
