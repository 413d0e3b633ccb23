"""The page of a one-click link in a request e-mail (docs/email.md, "One-click
links"): `/email/decide/{token}`. The rules are services/email_links.py's.

GET shows what is asked and ONE button (Approve, or Deny with a note box); it
decides nothing and never marks the token used: mail scanners, antivirus
gateways and link previews fetch every link in a mail. Only the button's POST
decides.

CSRF. The token in the URL is the credential, so a forged POST would need the
token already; still, the POST is refused unless it comes from this site's own
page: `Sec-Fetch-Site` (when the browser sends it) must be `same-origin`, an
`Origin` (when sent) must be this host, and the form must carry the page's
CSRF token. Without a login that is a double-submit token (a random value in a
cookie scoped to /email/decide, as the pairing page's); with
`email_links_require_login`, the web session's own CSRF token (web/auth.py).

Bad tokens count as failed logins of the client address (services/rate_limits
.AddressGuess, as a notification's action tokens): over the limit, 429.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.domain.errors import DomainError, RateLimited
from mailui4agents.services import email_links
from mailui4agents.services.principals import Principal
from mailui4agents.services.rate_limits import AddressGuess
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.shapes import request_json
from mailui4agents.web.views import SECURITY_HEADERS, _page, _text

router = APIRouter(include_in_schema=False)

PATH = "/email/decide"
CSRF_COOKIE = "am_link_csrf"
# The URL holds the token: never send it on as a Referer, never index it.
HEADERS = {**SECURITY_HEADERS, "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}
FORM_FIELDS = 10
FORM_PART_BYTES = 64 * 1024  # the note; its own limit (text_max_bytes) is checked after


def _render(
    request: Request,
    user: WebUser | None,
    status_code: int = 200,
    *,
    csrf_cookie: str | None = None,
    **ctx: Any,
) -> Response:
    response = _page(
        request, "email_decide.html", user, status_code=status_code, action=request.url.path, **ctx
    )
    response.headers.update(HEADERS)
    if csrf_cookie is not None:
        response.set_cookie(
            CSRF_COOKIE,
            csrf_cookie,
            max_age=3600,
            httponly=True,
            samesite="lax",  # a second link opened from the mail keeps the first's value
            secure=auth.is_https(request),
            path=PATH,
        )
    return response


def _refusal(request: Request, user: WebUser | None, refusal: DomainError) -> Response:
    """A refusal as its page: a bad link says only that (404 unknown, 410 used,
    expired or its address removed); a request decided by someone else says
    by whom (409); anything else with the API's status."""
    if isinstance(refusal, email_links.BadLink):
        return _render(request, user, 410 if refusal.gone else 404, error=refusal.message)
    err = data.as_service_error(refusal)
    response = _render(request, user, err.status, error=err.message)
    response.headers.update(err.headers)
    return response


def _guess(request: Request) -> AddressGuess:
    return AddressGuess(gateway(request).logins, data.client_address(request))


def _login_prompt(request: Request, user: WebUser | None) -> Response:
    target = f"/login?next={quote(request.url.path, safe='')}"
    return _render(request, user, 401, login=target)


def _viewer(user: WebUser | None) -> Principal | None:
    return user.principal if user is not None else None


@router.get(PATH + "/{token}")
async def link_page(request: Request, token: str) -> Response:
    """What the link would decide, and one button; nothing is decided or used."""
    gw = gateway(request)
    user = await auth.current(request)
    require = gw.settings.email_links_require_login
    try:
        guess = _guess(request)
    except RateLimited as refusal:
        return _refusal(request, user, refusal)
    try:
        async with gw.read() as s:
            shown = await email_links.peek(s, token, _viewer(user), require_login=require)
    except email_links.LoginNeeded:
        return _login_prompt(request, user)
    except email_links.BadLink as bad:
        guess.bad()
        return _refusal(request, user, bad)
    except DomainError as refusal:
        return _refusal(request, user, refusal)
    if require:
        assert user is not None  # peek refused otherwise
        return _render(
            request, user, kind=shown.kind, asked=request_json(shown.request), form_csrf=user.csrf
        )
    value, fresh = _link_csrf(request)
    return _render(
        request,
        user,
        kind=shown.kind,
        asked=request_json(shown.request),
        form_csrf=value,
        csrf_cookie=value if fresh else None,
    )


def _link_csrf(request: Request) -> tuple[str, bool]:
    """The double-submit token of a page shown without a login, and whether
    its cookie must be set now (as the login form's: web/auth.login_csrf)."""
    have = request.cookies.get(CSRF_COOKIE, "")
    if len(have) == 43:
        return have, False
    return secrets.token_urlsafe(32), True


def same_origin(request: Request) -> bool:
    """The POST comes from a page of this site, as far as the browser says:
    `Sec-Fetch-Site` same-origin (or none: the person's own navigation), and
    an `Origin` naming this host. A client that sends neither (curl, an old
    browser) is judged by the CSRF token alone."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc.lower() == request.url.netloc.lower()


def _csrf_ok(request: Request, user: WebUser | None, require: bool, sent: str) -> bool:
    if require:
        return user is not None and auth.csrf_ok(request, user, sent)
    have = request.cookies.get(CSRF_COOKIE, "")
    return bool(have) and len(sent) == len(have) and hmac.compare_digest(have, sent)


def _forbidden(request: Request, user: WebUser | None, why: str) -> Response:
    return _render(request, user, 403, error=why)


@router.post(PATH + "/{token}")
async def link_decide(request: Request, token: str) -> Response:
    """Decide the link's request as its person (once)."""
    gw = gateway(request)
    user = await auth.current(request)
    require = gw.settings.email_links_require_login
    if not same_origin(request):
        return _forbidden(
            request, user, "This form came from another site. Open the link in the e-mail again."
        )
    if require and user is None:
        return auth.to_login(request)
    form = await request.form(max_files=0, max_fields=FORM_FIELDS, max_part_size=FORM_PART_BYTES)
    if not _csrf_ok(request, user, require, _text(form, auth.CSRF_FIELD)):
        return _forbidden(
            request, user, "Missing or wrong CSRF token. Open the link in the e-mail again."
        )
    try:
        guess = _guess(request)
    except RateLimited as refusal:
        return _refusal(request, user, refusal)
    try:
        done = await email_links.decide(
            gw,
            token,
            request_id=_text(form, "request"),
            note=_text(form, "note").strip() or None,
            viewer=_viewer(user),
            require_login=require,
        )
    except email_links.LoginNeeded:
        return auth.to_login(request)
    except email_links.BadLink as bad:
        guess.bad()
        return _refusal(request, user, bad)
    except DomainError as refusal:
        return _refusal(request, user, refusal)
    return _render(request, user, decided=request_json(done))
