"""A session's mbox from the web UI (docs/email.md, "Export"): the thread
page's "Export as mbox" link. The same messages as `GET
/api/v1/sessions/{id}/export` (services/email_export.py), for the logged-in
person who may read the session; anyone else gets the error page (404)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.uploads import content_disposition
from mailui4agents.services import email_export
from mailui4agents.web import auth
from mailui4agents.web.auth import gateway
from mailui4agents.web.views import _error

router = APIRouter(include_in_schema=False)


@router.get("/sessions/{session_id}/export")
async def export(request: Request, session_id: str) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    try:
        await email_export.check(gw, user.principal, session_id)  # before anything streams
    except DomainError as err:
        return _error(request, user, err)
    return StreamingResponse(
        email_export.mbox(gw, user.principal, session_id),
        media_type="application/mbox",
        headers={
            "Content-Disposition": content_disposition(f"session-{session_id}.mbox"),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        },
    )
