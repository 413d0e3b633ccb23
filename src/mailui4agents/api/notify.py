"""The caller's own notification policy and presence (docs/remote.md,
"Notification policy"). People only (agent keys: 403); there is no id in the
path, so nobody — admins included — reads or changes another person's policy.
services/notify_policy.py holds the rules.

The presence beacon is sent by the web UI's pages (static/app.js), so besides
`Authorization: Bearer` it takes the web session cookie with the page's CSRF
token in `X-CSRF-Token` (a cookie alone is what a cross-site request carries;
the token is what it cannot), as the push subscription routes do."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import Field

from mailui4agents.api.deps import GatewayDep, Human, PageOrToken
from mailui4agents.api.validation import StrictBody
from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import notify_policy
from mailui4agents.wire.notify import NotifyPolicyOut, PresenceOut

router = APIRouter(prefix="/api/v1/me", tags=["notify"])


class NotifyPolicyPatch(StrictBody):
    """A partial update: only the fields given change; null clears quiet hours,
    a reminder or escalation. Values are checked by domain/notify_policy.py
    (400 naming the field)."""

    push: bool | None = None
    email: bool | None = None
    email_mail: bool | None = None
    push_content: str | None = Field(default=None, max_length=10)
    skip_when_visible: bool | None = None
    quiet_start: str | None = Field(default=None, max_length=5)
    quiet_end: str | None = Field(default=None, max_length=5)
    timezone: str | None = Field(default=None, max_length=64)
    remind_after_min: int | None = None
    escalate_after_min: int | None = None
    email_digest_hour: int | None = None


# Fields for which null means "off" (the others must not be null when given).
NULLABLE = {
    "quiet_start",
    "quiet_end",
    "remind_after_min",
    "escalate_after_min",
    "email_digest_hour",
}


class PresenceIn(StrictBody):
    visible: bool


def _out(p: notify_policy.Policy) -> NotifyPolicyOut:
    return NotifyPolicyOut.model_validate(notify_policy.as_dict(p))


@router.get("/notify-policy", response_model=NotifyPolicyOut)
async def get_policy(who: Human, gw: GatewayDep) -> NotifyPolicyOut:
    async with gw.read() as s:
        return _out(await notify_policy.get_policy(s, who))


@router.put("/notify-policy", response_model=NotifyPolicyOut)
async def put_policy(body: NotifyPolicyPatch, who: Human, gw: GatewayDep) -> NotifyPolicyOut:
    """Change the fields given; the whole policy comes back."""
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    for name, value in changes.items():
        if value is None and name not in NULLABLE:
            raise invalid_value(name, f"{name} must not be null")
    async with gw.write() as s:
        return _out(await notify_policy.set_policy(s, who, changes, datetime.now(UTC)))


@router.post("/presence", response_model=PresenceOut)
async def presence(body: PresenceIn, login: PageOrToken, gw: GatewayDep) -> PresenceOut:
    """A page of the caller is visible (`true`, sent again every 30 s while it
    is) or no longer (`false`). While visible, and for 45 s after the last
    beacon, pushes are skipped if the policy says so (skip_when_visible). A
    beacon is written only when the stored deadline ends within 30 s."""
    now, who = datetime.now(UTC), login.who
    async with gw.read() as s:
        stored = await notify_policy.visible_until(s, who)
    if not notify_policy.presence_write_needed(stored, body.visible, now):
        return PresenceOut(visible_until=stored)
    async with gw.write() as s:
        until = await notify_policy.set_presence(s, who, body.visible, now)
    return PresenceOut(visible_until=until)
