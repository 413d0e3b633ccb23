"""The web session's cookie and its CSRF token, which the web pages (web/auth.py)
and the API routes a page calls with its cookie (api/deps.page_or_token) check
alike.

A web login is a server-side session: a user token (services/identity.py) in an
HttpOnly cookie. Every state-changing request with that cookie carries a token
derived from it (HMAC of the session token): a cookie alone is what a
cross-site request would carry; the token is what it cannot."""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request

SESSION_COOKIE = "am_web"
CSRF_HEADER = "x-csrf-token"


def csrf_for(token: str) -> str:
    """The CSRF token of the web session `token`."""
    return hmac.new(token.encode(), b"agentmail-web-csrf", hashlib.sha256).hexdigest()


def csrf_ok(request: Request, token: str, sent: str | None) -> bool:
    """`sent` (a form's field), else the X-CSRF-Token header, is `token`'s CSRF token."""
    value = sent or request.headers.get(CSRF_HEADER, "")
    return bool(value) and hmac.compare_digest(value, csrf_for(token))
