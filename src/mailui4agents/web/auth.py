"""Web sessions and CSRF.

A web login is a server-side session: a user token (services/identity.py) made
for the browser, named "web", expiring after settings.web_session_ttl_s and
revoked by "Log out". The cookie holds that token: HttpOnly (no script reads
it), SameSite=Lax (other sites' forms do not carry it), Secure over https.

CSRF: every state-changing form and fetch carries a token derived from the
session (HMAC of the session token), checked on every POST; without it, 403.
Before login, the login form's token is a random value kept in a second
cookie (double submit).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse

from mailui4agents.http import web_session
from mailui4agents.http.web_session import CSRF_HEADER as CSRF_HEADER
from mailui4agents.http.web_session import SESSION_COOKIE as SESSION_COOKIE
from mailui4agents.http.web_session import csrf_for as csrf_for
from mailui4agents.services import devices
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.web import data

LOGIN_CSRF_COOKIE = "am_login_csrf"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class WebUser:
    principal: Principal
    token: str

    @property
    def csrf(self) -> str:
        return csrf_for(self.token)


def gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


def is_https(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(gateway(request).settings.web_session_ttl_s),
        httponly=True,
        samesite="lax",
        secure=is_https(request),
        path="/",
    )


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=is_https(request)
    )


def login_csrf(request: Request) -> tuple[str, bool]:
    """The login form's token, and whether the cookie must be set now."""
    have = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if len(have) == 43:
        return have, False
    return secrets.token_urlsafe(32), True


def set_login_csrf(request: Request, response: Response, value: str) -> None:
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        value,
        max_age=3600,
        httponly=True,
        samesite="lax",
        secure=is_https(request),
        path="/login",
    )


def login_csrf_ok(request: Request, sent: str) -> bool:
    have = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    return bool(have) and hmac.compare_digest(have, sent)


async def current(request: Request) -> WebUser | None:
    token = request.cookies.get(SESSION_COOKIE, "")
    if not token:
        return None
    gw = gateway(request)
    who = await data.authenticate(gw, token)
    if who is None:
        return None
    await devices.seen(gw.db, token)  # a paired device's last_seen_at (services/devices.py)
    return WebUser(who, token)


def to_login(request: Request) -> RedirectResponse:
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    response = RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    if request.cookies.get(SESSION_COOKIE):
        clear_session_cookie(request, response)  # expired or revoked
    return response


def csrf_ok(request: Request, user: WebUser, sent: str | None) -> bool:
    return web_session.csrf_ok(request, user.token, sent)


def safe_next(value: str | None) -> str:
    """Only a path of this site: never '//evil' or 'https://evil' (open redirect)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value
