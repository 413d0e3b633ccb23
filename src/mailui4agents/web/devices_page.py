"""The web UI's device pages (docs/web.md, "Pairing a phone").

`/devices`: the person's devices (rename, revoke) and "Pair a device", which
shows the pairing QR code as an inline SVG made by segno, and its URL.
`/pair/{code}`: the page a phone opens from the QR code. Its GET only shows
whose device it becomes and one button; the POST (with the login form's
double-submit CSRF cookie, scoped to /pair) uses the code and sets the web
session cookie. A link scanner or chat preview fetching the URL therefore never
uses the code. Both count against the login limiter's per-address windows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from mailui4agents.domain.errors import DomainError, RateLimited
from mailui4agents.services import devices
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway, Transaction
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.row_actions import row_action
from mailui4agents.web.views import SECURITY_HEADERS, _common, _guard, _page, _text

router = APIRouter(include_in_schema=False)

PAIR_PATH = "/pair"
# The pairing page's URL holds the code: never send it on as a Referer.
PAIR_HEADERS = {**SECURITY_HEADERS, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}
T = TypeVar("T")
UNUSABLE = "This pairing link is unknown, already used or expired. Ask for a new one."


def qr_svg(url: str) -> Markup:
    """The QR code of `url` as an inline <svg> (segno; no script, no external
    load). Dark on white whatever the page's theme, so phones can read it.
    segno is imported here, when a QR is shown, not at every gateway start."""
    import segno

    svg = segno.make(url, error="m").svg_inline(
        scale=5, border=4, dark="#000", light="#fff", title="QR code of the pairing URL"
    )
    return Markup(svg)


def pairing_url(request: Request, code: str) -> str:
    return f"{str(request.base_url).rstrip('/')}{PAIR_PATH}/{code}"


async def this_device(gw: Gateway, token: str) -> tuple[str | None, str | None]:
    """The device this browser is logged in as and its push subscription's id
    (None, None: a password login that is no device yet)."""
    async with gw.read() as s:
        found = await devices.this_device(s, token)
    return (found.id, found.subscription_id) if found else (None, None)


@dataclass(frozen=True, slots=True)
class Pairing:
    """A pairing as its page shows it once: the URL with the code, its QR code."""

    url: str
    qr: Markup
    name: str
    expires_at: datetime


async def _render(
    request: Request,
    user: WebUser,
    *,
    pairing: Pairing | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    gw = gateway(request)
    async with gw.read() as s:
        items = await devices.list_devices(s, user.principal)
    here, subscription = await this_device(gw, user.token)
    return _page(
        request,
        "devices.html",
        user,
        status_code=status_code,
        devices=items,
        this_device=next((d for d in items if d.id == here), None),
        subscription_id=subscription or "",
        pairing=pairing,
        error=error,
        **(await _common(request, user)),
    )


@router.get("/devices")
async def devices_page(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    return await _render(request, user)


@router.post("/devices/pair")
async def pair(request: Request) -> Response:
    """A pairing for a device of this person, shown once: the QR code and its URL."""
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    gw = gateway(request)
    try:
        async with gw.write() as s:
            code, expires, _ = await devices.create_pairing(s, user.principal, _text(form, "name"))
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        return await _render(request, user, error=err.message, status_code=err.status)
    url = pairing_url(request, code)
    pairing = Pairing(
        url=url, qr=qr_svg(url), name=devices.clean_name(_text(form, "name")), expires_at=expires
    )
    return await _render(request, user, pairing=pairing)


@router.post("/devices/{device_id}")
async def device_action(request: Request, device_id: str) -> Response:
    async def revoke(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await devices.revoke_device(s, who, device_id)

    async def rename(s: Transaction, who: Principal, form: Mapping[str, Any]) -> None:
        await devices.rename_device(s, who, device_id, _text(form, "name"))

    actions = {"revoke": revoke, "rename": rename}
    return await row_action(request, actions, f"/devices#device-{quote(device_id)}")


# --- the page a phone opens ---------------------------------------------------


def _pair_page(request: Request, code: str, status_code: int = 200, **ctx: Any) -> Response:
    token, fresh = auth.login_csrf(request)
    response = _page(
        request,
        "pair.html",
        None,
        status_code=status_code,
        login_csrf=token,
        action=f"{PAIR_PATH}/{quote(code, safe='')}",
        **ctx,
    )
    response.headers.update(PAIR_HEADERS)
    if fresh:
        response.set_cookie(
            auth.LOGIN_CSRF_COOKIE,
            token,
            max_age=3600,
            httponly=True,
            samesite="lax",
            secure=auth.is_https(request),
            path=PAIR_PATH,
        )
    return response


def _refused(request: Request, code: str, refusal: DomainError) -> Response:
    err = data.as_service_error(refusal)
    response = _pair_page(request, code, status_code=err.status, error=err.message)
    response.headers.update(err.headers)
    return response


async def _guessed(
    request: Request, code: str, look: Callable[[Gateway], Awaitable[T | None]]
) -> T | Response:
    """`look(gw)`'s answer for the code, counted as a guess of its client address
    (docs/web.md, "Pairing a phone"): a refusal page when over the limit, or
    when the code is unknown, used or expired."""
    gw = gateway(request)
    address = data.client_address(request)
    try:
        stamp = devices.begin_guess(gw.logins, address)
    except RateLimited as refusal:
        return _refused(request, code, refusal)
    found = await look(gw)
    if found is None:
        return _pair_page(request, code, status_code=404, error=UNUSABLE)
    devices.guess_succeeded(gw.logins, address, stamp)
    return found


@router.get(PAIR_PATH + "/{code}")
async def pair_page(request: Request, code: str) -> Response:
    """Whose device this browser becomes, and one button; nothing is used yet."""

    async def peek(gw: Gateway) -> tuple[str, str] | None:
        async with gw.read() as s:
            return await devices.peek(s, code)

    found = await _guessed(request, code, peek)
    if isinstance(found, Response):
        return found
    username, name = found
    return _pair_page(request, code, username=username, device=name)


@router.post(PAIR_PATH + "/{code}")
async def pair_login(request: Request, code: str) -> Response:
    """Use the code: this browser is logged in as the device (once)."""
    form = await request.form(max_files=0, max_fields=10)
    sent = form.get(auth.CSRF_FIELD)
    if not auth.login_csrf_ok(request, sent if isinstance(sent, str) else ""):
        return Response(
            "missing or wrong CSRF token: reload the page and try again",
            status_code=403,
            media_type="text/plain",
            headers=PAIR_HEADERS,
        )

    async def redeem(gw: Gateway) -> str | None:
        async with gw.write() as s:
            return await devices.redeem(s, code, gw.settings.web_session_ttl_s)

    token = await _guessed(request, code, redeem)
    if isinstance(token, Response):
        return token
    done = RedirectResponse("/", status_code=303)
    auth.set_session_cookie(request, done, token)
    done.delete_cookie(auth.LOGIN_CSRF_COOKIE, path=PAIR_PATH)
    return done
