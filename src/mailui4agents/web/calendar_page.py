"""The web UI's calendar page (docs/web.md): the caller's scheduled mail and a
form to schedule more. Server-rendered, CSRF-checked like every other form; the
same service calls as /api/v1/calendar (services/calendar.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.services import calendar
from mailui4agents.services.principals import Principal
from mailui4agents.state import Transaction
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.row_actions import row_action
from mailui4agents.web.views import _addresses, _common, _done, _error, _guard, _page, _text
from mailui4agents.wire.models import to_json

router = APIRouter(include_in_schema=False)

FORM_FIELDS = ("to", "cc", "subject", "body", "start_at", "timezone", "rrule")
SHOWN = 200


async def _render(
    request: Request,
    user: WebUser,
    *,
    everyone: bool = False,
    form: dict[str, str] | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    gw = gateway(request)
    async with gw.read() as s:
        found, _ = await calendar.list_entries(
            s, user.principal, status=None, everyone=everyone, limit=SHOWN, cursor=None
        )
    entries = [to_json(e) for e in found]  # the template's short_time filter reads ISO text
    return _page(
        request,
        "calendar.html",
        user,
        status_code=status_code,
        entries=entries,
        everyone=everyone,
        form=form or {},
        error=error,
        **(await _common(request, user)),
    )


@router.get("/calendar")
async def calendar_page(request: Request, everyone: bool = False) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    try:
        return await _render(request, user, everyone=everyone)
    except data.Refusal as err:
        return _error(request, user, err)


@router.post("/calendar")
async def schedule(request: Request) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    values = {name: _text(form, name) for name in FORM_FIELDS}
    draft = calendar.Draft(
        to=_addresses(values["to"]),
        cc=_addresses(values["cc"]),
        subject=values["subject"],
        body=values["body"],
        start_at=values["start_at"],
        timezone=values["timezone"].strip() or "UTC",
        rrule=values["rrule"].strip() or None,
        attachment_ids=[],
    )
    gw = gateway(request)
    try:
        async with gw.write() as s:
            entry = await calendar.create(s, gw.settings, user.principal, draft)
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        if _wants_json(request):
            return _error(request, user, refusal)
        field = f"{err.field}: " if err.field and err.field not in err.message else ""
        return await _render(
            request, user, form=values, error=field + err.message, status_code=err.status
        )
    return _done(request, f"/calendar#entry-{quote(entry.id)}", {"id": entry.id})


@router.post("/calendar/{entry_id}")
async def entry_action(request: Request, entry_id: str) -> Response:
    async def cancel(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await calendar.cancel(s, who, entry_id)

    return await row_action(request, {"cancel": cancel}, f"/calendar#entry-{quote(entry_id)}")


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")
