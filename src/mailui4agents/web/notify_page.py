"""The web UI's notification settings (docs/remote.md, "Notification policy"):
`/notifications` shows the person's own policy in one form; its POST (CSRF-checked
like every form, web/views._guard) saves the whole form through the same service
as `PUT /api/v1/me/notify-policy`. A refusal comes back in the form, naming the
field, with what was typed kept."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import notify_policy
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.views import _common, _done, _error, _guard, _page, _text

router = APIRouter(include_in_schema=False)

PATH = "/notifications"
CHECKBOXES = ("push", "email", "skip_when_visible")
TEXTS = ("push_content", "quiet_start", "quiet_end", "timezone")
MINUTES = ("remind_after_min", "escalate_after_min")


def _shown(p: notify_policy.Policy) -> dict[str, Any]:
    """The policy as the form's values (text; empty: off)."""
    out: dict[str, Any] = notify_policy.as_dict(p)
    for name in ("quiet_start", "quiet_end", *MINUTES):
        out[name] = "" if out[name] is None else str(out[name])
    return out


def _typed(form: Mapping[str, Any]) -> dict[str, Any]:
    """What the form says, in the form it was typed (to show it again)."""
    out: dict[str, Any] = {name: _text(form, name) == "on" for name in CHECKBOXES}
    out.update({name: _text(form, name).strip() for name in (*TEXTS, *MINUTES)})
    return out


def _changes(typed: dict[str, Any]) -> dict[str, Any]:
    """The whole policy from the form (an unticked box is absent: false; an empty
    time or number: off); Invalid naming the field for a number that is none."""
    changes = {name: typed[name] for name in CHECKBOXES}
    changes["push_content"] = typed["push_content"]
    changes["timezone"] = typed["timezone"] or "UTC"
    for name in ("quiet_start", "quiet_end"):
        changes[name] = typed[name] or None
    for name in MINUTES:
        text = typed[name]
        if not text:
            changes[name] = None
        elif text.isascii() and text.isdigit() and len(text) <= 5:
            changes[name] = int(text)
        else:
            raise invalid_value(name, f"{name} must be a whole number of minutes, or empty")
    return changes


async def _render(
    request: Request,
    user: WebUser,
    values: dict[str, Any],
    *,
    error: str | None = None,
    error_field: str | None = None,
    saved: bool = False,
    status_code: int = 200,
) -> Response:
    return _page(
        request,
        "notify.html",
        user,
        status_code=status_code,
        policy=values,
        error=error,
        error_field=error_field,
        saved=saved,
        **(await _common(request, user)),
    )


@router.get(PATH)
async def notify_page(request: Request, saved: bool = False) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    gw = gateway(request)
    async with gw.read() as s:
        policy = await notify_policy.get_policy(s, user.principal)
    return await _render(request, user, _shown(policy), saved=saved)


@router.post(PATH)
async def save(request: Request) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    typed = _typed(form)
    gw = gateway(request)
    try:
        changes = _changes(typed)
        async with gw.write() as s:
            await notify_policy.set_policy(s, user.principal, changes, datetime.now(UTC))
    except data.Refusal as refusal:
        if "application/json" in request.headers.get("accept", ""):
            return _error(request, user, refusal)
        err = data.as_service_error(refusal)
        field = f"{err.field}: " if err.field and err.field not in err.message else ""
        return await _render(
            request,
            user,
            typed,
            error=field + err.message,
            error_field=err.field,
            status_code=err.status,
        )
    return _done(request, f"{PATH}?saved=1")
