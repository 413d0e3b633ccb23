"""The review's forms (docs/review.md, "Reading and commenting in the web UI"):
a comment on lines of a `work` mail, taking back a pending one, Send review, and
an owner's Merge / Discard / Keep. Each calls the service the API route calls
(services/review.py, services/work.py) with the person's web session; the forms
work without JavaScript, and static/diff.js sends them by fetch asking for JSON
(the API's answer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from mailui4agents.services import review as review_service
from mailui4agents.services import work
from mailui4agents.web import auth, data
from mailui4agents.web.auth import gateway
from mailui4agents.web.views import _done, _error, _guard, _text, _wants_json
from mailui4agents.wire.models import to_json

router = APIRouter(include_in_schema=False)

MAX_FIELD = 5000  # a form field longer than any path or comment is refused by its service


def _number(form: Mapping[str, Any], name: str, *, required: bool) -> int | None:
    text = _text(form, name).strip()
    if not text and not required:
        return None
    if not text.isdigit() or len(text) > 9:
        raise data.ServiceError(400, "invalid_value", f"{name} must be a line number", field=name)
    return int(text)


@router.post("/mails/{mail_id}/comments")
async def add_comment(request: Request, mail_id: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    side: Literal["new", "old"] = "old" if _text(form, "side") == "old" else "new"
    try:
        if _text(form, "side") not in ("", "new", "old"):
            raise data.ServiceError(400, "invalid_value", "side is new or old", field="side")
        line = _number(form, "line", required=True)
        assert line is not None
        comment = review_service.CommentIn(
            path=_text(form, "path")[:MAX_FIELD],
            line=line,
            body=_text(form, "body")[:MAX_FIELD],
            end_line=_number(form, "end_line", required=False),
            side=side,
        )
        out = await review_service.add_comment(gateway(request), user.principal, mail_id, comment)
    except data.Refusal as err:
        return _error(request, user, err)
    if _wants_json(request):
        return JSONResponse(to_json(out), status_code=201)
    return _done(request, f"/sessions/{quote(out.session_id)}#m-{quote(mail_id)}", out)


@router.post("/comments/{comment_id}/delete")
async def delete_comment(request: Request, comment_id: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    try:
        async with gateway(request).write() as s:
            await review_service.delete_comment(s, user.principal, comment_id)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, auth.safe_next(_text(form, "next") or "/"))


@router.post("/sessions/{session_id}/review")
async def send_review(request: Request, session_id: str) -> Response:
    user, refused, _ = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    try:
        out = await review_service.send_review(gateway(request), user.principal, session_id)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, f"/sessions/{quote(session_id)}", out)


@router.post("/sessions/{session_id}/work/actions")
async def work_action(request: Request, session_id: str) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    action = _text(form, "action")
    try:
        if action not in work.ACTIONS:
            raise data.ServiceError(
                400, "invalid_value", "action is merge, discard, keep or push", field="action"
            )
        out = await work.request_action(gateway(request), user.principal, session_id, action)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, f"/sessions/{quote(session_id)}#work-panel", out)
