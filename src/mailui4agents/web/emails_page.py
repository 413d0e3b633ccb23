"""The web UI's e-mail addresses page (docs/email.md, "Addresses"): `/emails`
lists the person's own addresses (verified or not, and what became of the last
e-mail to each), adds one (a verification link is mailed to it: the address
counts only once that link's button is pressed, web/email_page.py) and removes
one. The same service as `GET|POST /api/v1/me/emails` and `DELETE
/api/v1/me/emails/{id}` (services/email_addresses.py); every POST is
CSRF-checked like every form (web/views._guard). A refusal comes back in the
form, naming the field, with what was typed kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.services import email_addresses
from mailui4agents.services.principals import Principal
from mailui4agents.state import Transaction
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.row_actions import row_action
from mailui4agents.web.views import _common, _done, _error, _guard, _page, _text

router = APIRouter(include_in_schema=False)

PATH = "/emails"


async def _render(
    request: Request,
    user: WebUser,
    *,
    typed: str = "",
    added: str | None = None,
    removed: bool = False,
    error: str | None = None,
    error_field: str | None = None,
    status_code: int = 200,
) -> Response:
    gw = gateway(request)
    async with gw.read() as s:
        items = await email_addresses.list_addresses(s, user.principal)
    return _page(
        request,
        "emails.html",
        user,
        status_code=status_code,
        addresses=items,
        sends_email=gw.settings.smtp_url is not None and gw.settings.mail_from is not None,
        max_addresses=gw.settings.email_max_addresses,
        typed=typed,
        added=added,
        removed=removed,
        error=error,
        error_field=error_field,
        **(await _common(request, user)),
    )


@router.get(PATH)
async def emails_page(
    request: Request, added: str | None = None, removed: bool = False
) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    return await _render(request, user, added=(added or "")[:300] or None, removed=removed)


@router.post(PATH)
async def add(request: Request) -> Response:
    """Add an address (or mail a new link to one still unverified)."""
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    gw = gateway(request)
    typed = _text(form, "address").strip()
    base = str(request.base_url)
    try:
        async with gw.write() as s:
            out, _ = await email_addresses.add_address(
                s,
                gw.settings,
                user.principal,
                typed,
                lambda token: email_addresses.verify_url(base, token),
            )
    except data.Refusal as refusal:
        if "application/json" in request.headers.get("accept", ""):
            return _error(request, user, refusal)
        err = data.as_service_error(refusal)
        response = await _render(
            request,
            user,
            typed=typed,
            error=err.message,
            error_field=err.field or "address",
            status_code=err.status,
        )
        response.headers.update(err.headers)
        return response
    return _done(request, f"{PATH}?added={quote(out.address, safe='@')}", out)


@router.post(PATH + "/{address_id}")
async def remove(request: Request, address_id: str) -> Response:
    """`action=remove`: remove one of the person's addresses."""

    async def remove_one(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await email_addresses.remove_address(s, who, address_id)

    return await row_action(request, {"remove": remove_one}, f"{PATH}?removed=1")
