"""The web UI's notification settings (docs/remote.md, "Notification policy"):
`/notifications` shows the person's own policy in one form; its POST (CSRF-checked
like every form, web/views._guard) saves the whole form through the same service
as `PUT /api/v1/me/notify-policy`. A refusal comes back in the form, naming the
field, with what was typed kept."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import notify_policy
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.views import _common, _done, _error, _guard, _page, _text

router = APIRouter(include_in_schema=False)

PATH = "/notifications"


class PolicyForm(TypedDict):
    """The form's values: the policy as text (empty: off), or as it was typed."""

    push: bool
    email: bool
    email_mail: bool
    skip_when_visible: bool
    push_content: str
    quiet_start: str
    quiet_end: str
    timezone: str
    remind_after_min: str
    escalate_after_min: str
    email_digest_hour: str


def _text_or_empty(value: object) -> str:
    return "" if value is None else str(value)


def _shown(p: notify_policy.Policy) -> PolicyForm:
    """The policy as the form's values (text; empty: off)."""
    return PolicyForm(
        push=p.push,
        email=p.email,
        email_mail=p.email_mail,
        skip_when_visible=p.skip_when_visible,
        push_content=p.push_content,
        quiet_start=_text_or_empty(p.quiet_start),
        quiet_end=_text_or_empty(p.quiet_end),
        timezone=p.timezone,
        remind_after_min=_text_or_empty(p.remind_after_min),
        escalate_after_min=_text_or_empty(p.escalate_after_min),
        email_digest_hour=_text_or_empty(p.email_digest_hour),
    )


def _typed(form: Mapping[str, Any]) -> PolicyForm:
    """What the form says, in the form it was typed (to show it again)."""

    def box(name: str) -> bool:
        return _text(form, name) == "on"

    def typed(name: str) -> str:
        return _text(form, name).strip()

    return PolicyForm(
        push=box("push"),
        email=box("email"),
        email_mail=box("email_mail"),
        skip_when_visible=box("skip_when_visible"),
        push_content=typed("push_content"),
        quiet_start=typed("quiet_start"),
        quiet_end=typed("quiet_end"),
        timezone=typed("timezone"),
        remind_after_min=typed("remind_after_min"),
        escalate_after_min=typed("escalate_after_min"),
        email_digest_hour=typed("email_digest_hour"),
    )


def _minutes(
    typed: PolicyForm, name: Literal["remind_after_min", "escalate_after_min"]
) -> int | None:
    """A `*_after_min` field: empty is off; Invalid naming the field for a number that is none."""
    text = typed[name]
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 5:
        return int(text)
    raise invalid_value(name, f"{name} must be a whole number of minutes, or empty")


def _hour(typed: PolicyForm) -> int | None:
    """The digest hour: empty is none; Invalid naming the field for a number that is none."""
    text = typed["email_digest_hour"]
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 2:
        return int(text)
    raise invalid_value("email_digest_hour", "email_digest_hour must be an hour 0-23, or empty")


def _changes(typed: PolicyForm) -> notify_policy.PolicySettings:
    """The whole policy from the form (an unticked box is absent: false; an empty
    time or number: off); Invalid naming the field for a number that is none."""
    return notify_policy.PolicySettings(
        push=typed["push"],
        email=typed["email"],
        email_mail=typed["email_mail"],
        push_content=typed["push_content"],
        skip_when_visible=typed["skip_when_visible"],
        quiet_start=typed["quiet_start"] or None,
        quiet_end=typed["quiet_end"] or None,
        timezone=typed["timezone"] or "UTC",
        remind_after_min=_minutes(typed, "remind_after_min"),
        escalate_after_min=_minutes(typed, "escalate_after_min"),
        email_digest_hour=_hour(typed),
    )


async def _render(
    request: Request,
    user: WebUser,
    values: PolicyForm,
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
