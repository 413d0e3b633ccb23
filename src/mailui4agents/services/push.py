"""What a permission request or question pushes to the deciders' devices, and the
push that withdraws it once it is settled (docs/remote.md, "Approving from a
notification").

A request opens → for each decider whom the notification policy says to push
(services/notify_policy.first_push), each of their devices with a live web session
and a push subscription gets one push: a payload per the contract below and a
single-use action token, bound to the request and the device, expiring with the
request (only its SHA-256 is stored). The push itself is written to the outbox in
the request's transaction and sent after commit (services/push_send.py).

A request is decided, expires or is cancelled → every device that was pushed it
gets a second push with the same `tag` ("Already handled"), which replaces the
first notification; their unused tokens die (their `expires_at` becomes now, so
they can decide nothing; a token that was used stays "used", which is how the
actions route tells a reused token, 401, from a request someone else decided
first, 409).

Payload (JSON, encrypted at send): `{type, request_id, title, body, tag, actions:
[{action, title}], action_token?, url}`. Text is a preview of at most
MAX_PREVIEW characters, masked again (domain/masking.py) although the stored
input is masked already; with the person's `push_content: "none"` it names
nothing of the request (no agent, tool, command or question) and offers no
actions: deciding something unseen from a lock screen is what that setting is
there to prevent.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.base import new_id
from mailui4agents.db.reach_tables import (
    DeviceRow,
    PushActionTokenRow,
    PushSubscriptionRow,
    RequestDeliveryRow,
)
from mailui4agents.db.tables import PermissionRow, SessionRow, UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.decided_via import via_text
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.masking import mask_text
from mailui4agents.services import notify_policy, push_send
from mailui4agents.services.identity import hash_token

TOKEN_BYTES = 32  # 256 bits, like every other token of the gateway
MAX_TOKEN_CHARS = 100  # longer is not one of ours (and is not hashed)
MAX_PREVIEW = 120
MAX_INLINE_OPTIONS = 2  # a notification shows two action buttons on most platforms
MAX_BUTTON = 40  # characters of an option label that still fits on a button

_TOKENS = cast(Table, PushActionTokenRow.__table__)
_DELIVERIES = cast(Table, RequestDeliveryRow.__table__)


@dataclass(frozen=True, slots=True)
class Target:
    """One device to push: whose, which, its subscription."""

    person: str
    device_id: str
    device_name: str
    subscription_id: str


async def subscribed_devices(s: AsyncSession, names: list[str], now: datetime) -> list[Target]:
    """The subscribed devices of `names` whose login still works."""
    if not names:
        return []
    return [Target(*found) for found in await s.execute(_TARGETS, {"b_names": names, "b_now": now})]


def live_device(now: Any) -> Any:
    """A test on DeviceRow joined to its UserTokenRow: the device's login still works
    (a revoked device has a revoked token, or no device row at all)."""
    return and_(
        UserTokenRow.revoked_at.is_(None),
        or_(UserTokenRow.expires_at.is_(None), UserTokenRow.expires_at > now),
    )


# The subscribed devices of the named people whose login still works.
_TARGETS = (
    select(UserRow.username, DeviceRow.id, DeviceRow.name, PushSubscriptionRow.id)
    .join(DeviceRow, DeviceRow.user_id == UserRow.id)
    .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
    .join(PushSubscriptionRow, PushSubscriptionRow.device_id == DeviceRow.id)
    .where(UserRow.username.in_(bindparam("b_names", expanding=True)))
    .where(live_device(bindparam("b_now")))
    .order_by(UserRow.username, DeviceRow.created_at, DeviceRow.id)
)

# The devices a request was pushed to (each of its tokens names one), still
# subscribed; their people.
_PUSHED = (
    select(UserRow.username, DeviceRow.id, DeviceRow.name, PushSubscriptionRow.id)
    .distinct()
    .select_from(PushActionTokenRow)
    .join(DeviceRow, DeviceRow.id == PushActionTokenRow.device_id)
    .join(UserRow, UserRow.id == DeviceRow.user_id)
    .join(PushSubscriptionRow, PushSubscriptionRow.device_id == DeviceRow.id)
    .where(PushActionTokenRow.request_id == bindparam("b_request"))
)


def has_push_subscription(person: Any) -> Any:
    """A scalar test (for a column of a bigger query): `person` (a username
    column) has a device with a push subscription. Whether its login still works
    is left to _TARGETS: this only spares the look-up when nobody subscribed."""
    return (
        select(PushSubscriptionRow.id)
        .join(DeviceRow, DeviceRow.id == PushSubscriptionRow.device_id)
        .join(UserRow, UserRow.id == DeviceRow.user_id)
        .where(UserRow.username == person)
        .exists()
    )


def was_pushed(request_id: Any) -> Any:
    """A scalar test: the request (an id column) was pushed to some device."""
    return select(PushActionTokenRow.id).where(PushActionTokenRow.request_id == request_id).exists()


def request_url(row: PermissionRow) -> str:
    """The request's card in the web UI (what tapping the notification opens)."""
    return f"/approvals#req-{row.id}"


def _clip(text: str, width: int = MAX_PREVIEW) -> str:
    text = " ".join(mask_text(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def preview(row: PermissionRow) -> str:
    """What is asked, on one line, masked, at most MAX_PREVIEW characters."""
    if row.kind == "question":
        return _clip(row.question or "")
    tool_input = row.tool_input or {}
    for key in ("command", "file_path", "notebook_path", "path", "url", "pattern"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return _clip(value)
    if row.summary:
        return _clip(row.summary)
    return _clip(json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")))


_PREFIX = {"reminder": "Reminder: ", "escalation": "Escalated: "}


def actions_of(row: PermissionRow) -> list[dict[str, str]]:
    """The notification's buttons: approve/deny for an approval, the options of a
    question with at most two; none otherwise (tapping opens the request)."""
    if row.kind == "approval":
        return [{"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"}]
    labels = [str(o["label"]) for o in row.options or []]
    fits = all(len(label) <= MAX_BUTTON for label in labels)
    if labels and len(labels) <= MAX_INLINE_OPTIONS and fits and not row.multi_select:
        return [{"action": label, "title": label} for label in labels]
    return []


def request_payload(
    row: PermissionRow, session: SessionRow, policy: notify_policy.Policy, kind: str, token: str
) -> JsonObject:
    """The push of an open request (kind: permission_request, reminder, escalation)."""
    prefix = _PREFIX.get(kind, "")
    if policy.push_content == "none":
        what = "A question" if row.kind == "question" else "An approval"
        title, body, actions = f"{prefix}{what} is waiting", "Open agentmail to see it.", []
    elif row.kind == "question":
        title = f"{prefix}{row.agent_name} asks ({session.alias})"
        body, actions = preview(row), actions_of(row)
    else:
        title = f"{prefix}{row.agent_name} wants {row.tool_name} ({session.alias})"
        body, actions = preview(row), actions_of(row)
    return {
        "type": "permission_request",
        "request_id": row.id,
        "title": _clip(title),
        "body": body,
        "tag": row.id,
        "actions": actions,
        "action_token": token,
        "url": request_url(row),
    }


async def queue_request(
    s: AsyncSession,
    row: PermissionRow,
    session: SessionRow,
    people: Mapping[str, notify_policy.Policy],
    *,
    kind: str = "permission_request",
) -> int:
    """Queue the request's push to each subscribed device of `people` (in the
    caller's transaction; sent after commit). Returns how many were queued."""
    names = [name for name, policy in people.items() if policy.push]
    if not names:
        return 0
    found = await subscribed_devices(s, names, utcnow())
    if not found:
        return 0
    tokens = [secrets.token_urlsafe(TOKEN_BYTES) for _ in found]
    await s.execute(
        insert(_TOKENS),
        [
            {
                "id": new_id(),
                "token_hash": hash_token(token),
                "request_id": row.id,
                "device_id": target.device_id,
                "expires_at": row.expires_at,
                "used_at": None,
            }
            for target, token in zip(found, tokens, strict=True)
        ],
    )
    for target, token in zip(found, tokens, strict=True):
        payload = request_payload(row, session, people[target.person], kind, token)
        await push_send.enqueue(
            s,
            subscription_id=target.subscription_id,
            request_id=row.id,
            kind=kind,
            payload=payload,
            person=target.person,
            device_id=target.device_id,
            device_name=target.device_name,
        )
    return len(found)


def settled_text(row: PermissionRow, now: datetime | None = None) -> str:
    """How a settled request ended, in words: "approved by ana from Ana's phone",
    "timed out", "cancelled by bob"."""
    if row.status == "expired":
        return "timed out"
    if row.status == "cancelled" and row.decided_channel == "terminal":
        return "answered in the terminal"
    if row.status == "cancelled":
        return f"cancelled by {row.decided_by}" if row.decided_by != "system" else "cancelled"
    status = "answered" if row.kind == "question" and row.status == "approved" else row.status
    return f"{status} by {who_decided(row)}{via_text(row.decided_channel, row.decided_device)}"


def who_decided(row: PermissionRow) -> str:
    by = row.decided_by or "someone"
    return "a standing grant" if by.startswith("grant:") else by


async def queue_settled(s: AsyncSession, row: PermissionRow) -> int:
    """The request is settled: every device it was pushed to gets "Already
    handled" with the same tag, and a `decided`/`withdrawn` delivery row; the
    request's unused tokens die. Returns how many pushes were queued."""
    now = utcnow()
    targets = [Target(*found) for found in await s.execute(_PUSHED, {"b_request": row.id})]
    # Dead, not used: a token of a request someone else settled answers 409
    # with who did, not 401 (services/push_actions.py).
    await s.execute(
        update(_TOKENS)
        .where(_TOKENS.c.request_id == row.id, _TOKENS.c.used_at.is_(None))
        .where(_TOKENS.c.expires_at > now)
        .values(expires_at=now)
    )
    if not targets:
        return 0
    decided = row.status in ("approved", "denied")
    kind = "decided" if decided else "withdrawn"
    text = settled_text(row, now)
    await s.execute(
        insert(_DELIVERIES),
        [
            {
                "request_id": row.id,
                "channel": "push",
                "person": target.person,
                "device_id": target.device_id,
                "device_name": target.device_name,
                "state": kind,
                "detail": f"Already handled: {text}",
                "latency_us": None,
                "at": now,
            }
            for target in targets
        ],
    )
    for target in targets:
        payload = {
            "type": kind,
            "request_id": row.id,
            "title": "Already handled",
            "body": _clip(text[:1].upper() + text[1:]),
            "tag": row.id,
            "actions": [],
            "url": request_url(row),
        }
        await push_send.enqueue(
            s,
            subscription_id=target.subscription_id,
            request_id=row.id,
            kind=kind,
            payload=payload,
            person=target.person,
            device_id=target.device_id,
            device_name=target.device_name,
        )
    return len(targets)
