"""The page of an e-mail verification link (docs/email.md, "Addresses").

`GET /verify-email/{token}` shows which address becomes whose and one button;
it changes nothing, because mail scanners and link previews fetch every link in
a mail. Only the POST of that button verifies (services/email_addresses.py).
No login is needed: the token (256 bits, single use, expiring) is the credential,
and the one who can read the mailbox is the one being asked.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from mailui4agents.domain.errors import Conflict, NotFound
from mailui4agents.services import email_addresses
from mailui4agents.web.auth import gateway
from mailui4agents.web.render import environment
from mailui4agents.web.views import SECURITY_HEADERS

router = APIRouter(include_in_schema=False)

# The URL holds the token: never send it on as a Referer, never index it.
HEADERS = {**SECURITY_HEADERS, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}


def _render(request: Request, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    html = (
        environment()
        .get_template("verify_email.html")
        .render(request=request, user=None, csrf="", path=request.url.path, **ctx)
    )
    return HTMLResponse(html, status_code=status_code, headers=HEADERS)


@router.get("/verify-email/{token}")
async def verify_page(request: Request, token: str) -> HTMLResponse:
    async with gateway(request).read() as s:
        found = await email_addresses.pending(s, token)
    if found is None:
        return _render(request, 404, error=email_addresses.UNUSABLE)
    return _render(request, address=found.address, username=found.username, action=request.url.path)


@router.post("/verify-email/{token}")
async def verify(request: Request, token: str) -> HTMLResponse:
    try:
        async with gateway(request).write() as s:
            done = await email_addresses.verify(s, token)
    except NotFound:
        return _render(request, 404, error=email_addresses.UNUSABLE)
    except Conflict as exc:
        return _render(request, 409, error=exc.message)
    return _render(request, verified=True, address=done.address, username=done.username)
