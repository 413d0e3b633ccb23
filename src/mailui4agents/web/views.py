"""The web UI's routes (see docs/web.md). Pages are rendered on the server and
work without JavaScript; static/app.js adds live updates over the SSE stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from pydantic import BaseModel

from mailui4agents.domain.errors import DomainError
from mailui4agents.domain.modes import MODES
from mailui4agents.web import auth, data, work_page
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.render import environment, static_file
from mailui4agents.web.shapes import MailJson, RequestJson
from mailui4agents.wire.models import to_json

router = APIRouter(include_in_schema=False)

FORM_MAX_FIELD = 1_000_000

SECURITY_HEADERS = {
    # Our own scripts and styles only: an injected inline script would not run.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _page(
    request: Request,
    template: str,
    user: WebUser | None,
    status_code: int = 200,
    **ctx: Any,
) -> HTMLResponse:
    html = (
        environment()
        .get_template(template)
        .render(
            request=request,
            user=user.principal if user else None,
            csrf=user.csrf if user else "",
            path=request.url.path,
            **ctx,
        )
    )
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _error(
    request: Request, user: WebUser | None, refusal: data.ServiceError | DomainError
) -> Response:
    err = data.as_service_error(refusal)
    if _wants_json(request):
        return JSONResponse(err.body(), status_code=err.status)
    return _page(
        request,
        "error.html",
        user,
        status_code=err.status,
        message=err.message,
        field=err.field,
        back=auth.safe_next(request.headers.get("referer", "").partition(request.url.netloc)[2]),
    )


def _csrf_refused(request: Request) -> Response:
    body = {"error": {"code": "forbidden", "message": "missing or wrong CSRF token"}}
    if _wants_json(request):
        return JSONResponse(body, status_code=403)
    return HTMLResponse(
        "<!doctype html><title>Forbidden</title><h1>Forbidden</h1>"
        "<p>Missing or wrong CSRF token. Go back, reload the page and try again.</p>",
        status_code=403,
        headers=SECURITY_HEADERS,
    )


async def _form(request: Request) -> Mapping[str, Any]:
    form = await request.form(max_files=0, max_fields=200, max_part_size=FORM_MAX_FIELD)
    return form


async def _guard(request: Request) -> tuple[WebUser | None, Response | None, Mapping[str, Any]]:
    """The logged-in user and the form of a POST whose CSRF token is right; else
    the response to give (303 to /login, or 403)."""
    user = await auth.current(request)
    if user is None:
        if _wants_json(request):
            body = {"error": {"code": "unauthorized", "message": "log in first"}}
            return None, JSONResponse(body, status_code=401), {}
        return None, auth.to_login(request), {}
    form: Mapping[str, Any] = {}
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await _form(request)
    sent = form.get(auth.CSRF_FIELD)
    if not auth.csrf_ok(request, user, sent if isinstance(sent, str) else None):
        return user, _csrf_refused(request), form
    return user, None, form


def _done(
    request: Request, target: str, payload: BaseModel | Mapping[str, str] | None = None
) -> Response:
    """The answer to a POST that worked: 303 to `target`, or for a fetch the
    JSON of `payload` (the API's answer, `to_json`), else `{"ok": true}`."""
    if _wants_json(request):
        if isinstance(payload, BaseModel):
            return JSONResponse(to_json(payload))
        return JSONResponse(dict(payload) if payload else {"ok": True})
    return RedirectResponse(target, status_code=303)


def _text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


def _addresses(text: str) -> list[str]:
    return [a.strip() for a in text.replace(";", ",").split(",") if a.strip()]


# --- static files -------------------------------------------------------------


@router.get("/static/{name}")
async def static(name: str) -> Response:
    path = static_file(name)
    if path is None:
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(
        path,
        headers={
            "Cache-Control": "public, max-age=31536000, immutable",
            "X-Content-Type-Options": "nosniff",
        },
    )


# /manifest.webmanifest, /sw.js and /offline: web/pwa.py


# --- login ------------------------------------------------------------------


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    if await auth.current(request) is not None:
        return RedirectResponse(auth.safe_next(next), status_code=303)
    token, fresh = auth.login_csrf(request)
    response = _page(request, "login.html", None, login_csrf=token, next=auth.safe_next(next))
    if fresh:
        auth.set_login_csrf(request, response, token)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    form = await _form(request)
    if not auth.login_csrf_ok(request, _text(form, auth.CSRF_FIELD)):
        return _csrf_refused(request)
    target = auth.safe_next(_text(form, "next"))
    try:
        token = await data.login(
            gateway(request), request, _text(form, "username"), _text(form, "password")
        )
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        status = err.status if err.status in (401, 429) else 400
        response = _page(
            request,
            "login.html",
            None,
            status_code=status,
            login_csrf=_text(form, auth.CSRF_FIELD),
            next=target,
            error=err.message,
            username=_text(form, "username"),
        )
        for k, v in err.headers.items():
            response.headers[k] = v
        return response
    done = RedirectResponse(target, status_code=303)
    auth.set_session_cookie(request, done, token)
    return done


@router.post("/logout")
async def logout(request: Request) -> Response:
    user, refused, _ = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    await data.logout(gateway(request), user.principal, user.token)
    response = RedirectResponse("/login", status_code=303)
    auth.clear_session_cookie(request, response)
    return response


# --- pages --------------------------------------------------------------------


class Common(TypedDict):
    """What every page of a signed-in person shows: the pending requests."""

    pending_all: list[RequestJson]
    pending_count: int
    last_event_id: int


async def _common(request: Request, user: WebUser) -> Common:
    gw = gateway(request)
    pending = await data.pending(gw, user.principal)
    return {
        "pending_all": pending,
        "pending_count": len(pending),
        "last_event_id": await data.event_head(gw),
    }


@router.get("/")
async def mailbox(request: Request, archived: bool = False) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    common = await _common(request, user)
    sessions = await data.session_list(gw, user.principal, "archived" if archived else "active")
    sessions.sort(key=lambda s: s.last_mail_at or s.created_at, reverse=True)
    mails = await data.recent_mail(gw, user.principal)
    kinds = await data.request_kinds(gw, mails)  # a question's mail says "question"
    by_session: dict[str, list[MailJson]] = {}
    for m in mails:
        by_session.setdefault(m["session_id"], []).append(m)
    pending_by: dict[str, list[RequestJson]] = {}
    for p in common["pending_all"]:
        pending_by.setdefault(p["session_id"], []).append(p)
    return _page(
        request,
        "mailbox.html",
        user,
        sessions=sessions,
        mails=by_session,
        pending_by=pending_by,
        kinds=kinds,
        archived=archived,
        **common,
    )


@router.get("/sessions/{session_id}")
async def thread_page(request: Request, session_id: str) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    try:
        session, may_decide = await data.session(gw, user.principal, session_id)
        mails = await data.thread(gw, user.principal, session_id)
    except data.Refusal as err:
        return _error(request, user, err)
    grants = await data.session_grants(gw, user.principal, session_id) if may_decide else []
    common = await _common(request, user)  # expires what is due: cards show it so
    here = [p for p in common["pending_all"] if p["session_id"] == session_id]
    # Each request mail as its request's card (deciders), in one query for the page.
    requests = await data.thread_requests(gw, user.principal, session, mails)
    review = await work_page.review(gw, user.principal, session_id, mails)
    return _page(
        request,
        "thread.html",
        user,
        session=session,
        may_decide=may_decide,
        thread=mails,
        requests=requests,
        carded={mail_id for mail_id, r in requests.items() if r.get("card")},
        pending=here,
        grants=grants,
        modes=MODES,
        works=review.views,
        comments=review.comments,
        elsewhere=review.elsewhere,
        work_info=review.info,
        may_finish=review.may_finish,
        **common,
    )


@router.post("/sessions/{session_id}")
async def session_action(request: Request, session_id: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    action = _text(form, "action")
    gw = gateway(request)
    try:
        if action == "rename":
            out = await data.update_session(
                gw, user.principal, session_id, alias=_text(form, "alias").strip()
            )
        elif action in ("archive", "unarchive"):
            out = await data.update_session(
                gw, user.principal, session_id, archived=action == "archive"
            )
        elif action == "accept-alias":
            out = await data.accept_alias(gw, user.principal, session_id)
        elif action == "revoke-grant":
            await data.revoke_session_grant(gw, user.principal, session_id, _text(form, "grant_id"))
            out = None
        elif action == "mode":
            mode = _text(form, "mode")
            if mode not in MODES:
                raise data.ServiceError(
                    400, "invalid_value", "mode is plan, workspace or full", field="mode"
                )
            out = await data.update_session(gw, user.principal, session_id, permission_mode=mode)
        else:
            raise data.ServiceError(400, "invalid_value", "unknown action", field="action")
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, f"/sessions/{quote(session_id)}", out)


@router.get("/compose")
async def compose_page(
    request: Request, reply_to: str | None = None, to: str = "", subject: str = ""
) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    parent = None
    if reply_to:
        try:
            parent = await data.read_one_mail(gw, user.principal, reply_to)
        except data.Refusal as err:
            return _error(request, user, err)
        to = to or parent["reply_address"] or parent["from"]
        subject = subject or (
            parent["subject"]
            if parent["subject"].lower().startswith("re:")
            else f"Re: {parent['subject']}"
        )
    return _page(
        request,
        "compose.html",
        user,
        parent=parent,
        to=to,
        subject=subject,
        modes=MODES,
        **await _common(request, user),
    )


@router.post("/compose")
async def compose(request: Request) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    parent = _text(form, "parent_mail_id") or None
    mode = _text(form, "mode") or "workspace"
    draft = data.Draft(
        to=_addresses(_text(form, "to")),
        cc=_addresses(_text(form, "cc")),
        subject=_text(form, "subject"),
        body=_text(form, "body"),
        parent_mail_id=parent,
        attachment_ids=[a for a in _text(form, "attachment_ids").split(",") if a],
        # A reply keeps its session's mode; a new session takes the one chosen.
        permission_mode=None if parent else (mode if mode in MODES else "workspace"),
        # "Own worktree" (docs/review.md): only for the session this mail makes.
        worktree=not parent and bool(form.get("worktree")),
    )
    try:
        if not draft.to:
            raise data.ServiceError(400, "missing_field", "To: give an address", field="to")
        out = await data.send(gateway(request), user.principal, draft)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, f"/sessions/{quote(out.session_id)}", out)


@router.get("/approvals")
async def approvals_page(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    return _page(request, "approvals.html", user, **await _common(request, user))


@router.post("/approvals/{request_id}")
async def decide(request: Request, request_id: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    gw = gateway(request)
    choice = _text(form, "decision")
    note = _text(form, "note").strip() or None
    pattern = _text(form, "grant_pattern").strip() or None
    try:
        kind = await data.request_kind(gw, user.principal, request_id)
        answers: list[str] | None = None
        if kind == "question":
            # A question is answered, never approved or denied.
            picked = [v for v in form.getlist("answers") if isinstance(v, str)]  # type: ignore[attr-defined]
            typed = _text(form, "answer")
            answers = picked if picked else ([typed.strip()] if typed.strip() else [])
            if not answers:
                raise data.ServiceError(
                    400, "invalid_value", "an answer must not be empty", field="answers"
                )
            decision, always = "approve", False
        elif choice in ("approve", "deny", "always"):
            decision, always = ("deny" if choice == "deny" else "approve"), choice == "always"
        else:
            raise data.ServiceError(
                400, "invalid_value", "decision is approve, deny or always", field="decision"
            )
        chose = data.Choice(decision, note, always, pattern if always else None, answers, "web")
        out = await data.decide(gw, user.principal, user.token, request_id, chose)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, auth.safe_next(_text(form, "next") or "/approvals"), out)


@router.get("/contacts")
async def contacts_page(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    return _page(
        request,
        "contacts.html",
        user,
        contacts=await data.contacts(gw, user.principal),
        agents=await data.agents_status(gw, user.principal),
        **await _common(request, user),
    )


@router.get("/suggest")
async def suggest(request: Request, q: str = "") -> Response:
    user = await auth.current(request)
    if user is None:
        return JSONResponse({"error": {"code": "unauthorized", "message": "log in"}}, 401)
    try:
        return JSONResponse(to_json(await data.suggest(gateway(request), user.principal, q[:200])))
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        return JSONResponse(err.body(), status_code=err.status)


@router.get("/events")
async def events(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return JSONResponse({"error": {"code": "unauthorized", "message": "log in"}}, 401)
    try:
        stream: Response = data.open_events(request, gateway(request), user.principal, user.token)
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        return JSONResponse(err.body(), status_code=err.status)
    return stream


@router.post("/attachments")
async def upload(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return JSONResponse({"error": {"code": "unauthorized", "message": "log in"}}, 401)
    if not auth.csrf_ok(request, user, None):
        return _csrf_refused(request)
    try:
        return JSONResponse(
            to_json(await data.upload(request, gateway(request), user.principal)), 201
        )
    except data.Refusal as refusal:
        err = data.as_service_error(refusal)
        return JSONResponse(err.body(), status_code=err.status)


@router.get("/attachments/{attachment_id}")
async def download(request: Request, attachment_id: str) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    try:
        return await data.download(gateway(request), user.principal, attachment_id)
    except data.Refusal as err:
        return _error(request, user, err)


# --- admin ------------------------------------------------------------------


def _not_admin(request: Request, user: WebUser) -> Response | None:
    """The refusal for a person who is no admin (None for an admin): the API's
    check (api/deps.admin), services/identity.require_admin."""
    try:
        data.require_admin(user.principal)
    except data.Refusal as err:
        return _error(request, user, err)
    return None


@router.get("/admin")
async def admin_page(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    if (refusal := _not_admin(request, user)) is not None:
        return refusal
    gw = gateway(request)
    return _page(
        request,
        "admin.html",
        user,
        users=await data.users(gw),
        agents=await data.agents(gw),
        aliases=await data.aliases(gw, user.principal),
        grants=await data.grants(gw, user.principal),
        worktrees=await work_page.worktrees(gw),
        **await _common(request, user),
    )


@router.post("/admin/{action}")
async def admin_action(request: Request, action: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    if (refusal := _not_admin(request, user)) is not None:
        return refusal
    gw = gateway(request)
    try:
        if action == "users":
            await data.add_user(
                gw, _text(form, "username"), _text(form, "password"), bool(form.get("is_admin"))
            )
        elif action in ("make-admin", "revoke-admin"):
            await data.set_admin(gw, _text(form, "username"), action == "make-admin")
        elif action == "reset-password":
            await data.reset_password(
                gw, user.principal, user.token, _text(form, "username"), _text(form, "password")
            )
        elif action == "agents":
            name = _text(form, "name").strip()
            roots = _text(form, "workspaces").split()
            taskers = [t.strip() for t in _text(form, "taskers").split(",") if t.strip()]
            key = await data.add_agent(gw, user.principal, name, roots, taskers)
            return _key_page(request, user, name, key)
        elif action == "rotate":
            name = _text(form, "name")
            return _key_page(request, user, name, await data.rotate_key(gw, name))
        elif action == "revoke-key":
            await data.revoke_key(gw, _text(form, "name"), _text(form, "key_id"))
        elif action == "alias":
            alias, path = _text(form, "alias").strip(), _text(form, "workspace").strip()
            await data.put_alias(gw, user.principal, alias, path)
        elif action == "remove-alias":
            await data.remove_alias(gw, user.principal, _text(form, "alias"))
        elif action == "revoke-grant":
            await data.revoke_grant(gw, user.principal, _text(form, "grant_id"))
        else:
            raise data.ServiceError(404, "not_found", "no such admin action")
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, "/admin")


def _key_page(request: Request, user: WebUser, name: str, key: str) -> Response:
    """The key, this once: the page is not cached and the key is never shown again."""
    return _page(request, "key.html", user, name=name, key=key, pending_count=0)
