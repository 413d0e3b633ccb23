"""Deciding from a notification, its receipts, and a request's delivery log
(docs/remote.md, "Approving from a notification", "Tracking a request").

A notification's action posts the action token it came with (services/push.py):
no login, the token is the credential. It decides through the one service every
channel uses (services/permission_decisions.decide), as the person whose device
was pushed, with channel "push" and the device's name. In one transaction:

1. the token is looked up with its device, the device's login and its person: an
   unknown token, or a device revoked since (its login revoked or expired, or the
   device gone) → 401, checked now, not when the push was sent;
2. a token already used → 401 (a second tap, a replay);
3. a request no longer pending → 409 `already_decided`, saying who decided from
   where (services/permissions.already_decided); a token past its deadline → 401;
4. the action must fit the request: approve/deny for an approval, one of the
   question's option labels → else 400 naming `action`;
5. a conditional UPDATE marks the token used (of two racing posts of the same
   token, one wins; the other gets 401), then decide() settles the request with
   its own conditional UPDATE (of two devices racing, one wins; the other 409).
Steps 2 to 5 are services/token_decisions.py, which e-mail links share.

Receipts (`shown`, `opened`) need a token that is known and whose device still
works, used or not (the "Already handled" notification reports too); each state
is recorded once per device and request, so a receipt repeated is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import DeviceRow, PushActionTokenRow, RequestDeliveryRow
from mailui4agents.db.tables import PermissionRow, UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import DomainError, invalid_value, not_found
from mailui4agents.services import access, push, token_decisions
from mailui4agents.services.identity import hash_token
from mailui4agents.services.permission_decisions import Choice
from mailui4agents.services.principals import Principal
from mailui4agents.services.session_summary import get_session
from mailui4agents.wire.deliveries import DeliveryOut
from mailui4agents.wire.models import PermissionOut

RECEIPT_STATES = ("shown", "opened")


class BadToken(DomainError):
    """401: the token is unknown, used, expired, or its device was revoked."""

    default_code = "unauthorized"


@dataclass(frozen=True, slots=True)
class Held:
    """A known token of a working device: its request, device and person."""

    token_id: str
    request_id: str
    device_id: str
    device_name: str
    expires_at: datetime
    used_at: datetime | None
    person: Principal
    request: PermissionRow


_HELD = (
    select(
        PushActionTokenRow.id,
        PushActionTokenRow.request_id,
        PushActionTokenRow.expires_at,
        PushActionTokenRow.used_at,
        DeviceRow.id,
        DeviceRow.name,
        UserRow.id,
        UserRow.username,
        UserRow.is_admin,
        PermissionRow,
    )
    .join(DeviceRow, DeviceRow.id == PushActionTokenRow.device_id)
    .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
    .join(UserRow, UserRow.id == DeviceRow.user_id)
    .join(PermissionRow, PermissionRow.id == PushActionTokenRow.request_id)
    .where(PushActionTokenRow.token_hash == bindparam("b_hash"))
    .where(push.live_device(bindparam("b_now")))
)
_USE = (
    update(PushActionTokenRow)
    .where(
        PushActionTokenRow.id == bindparam("b_id"),
        PushActionTokenRow.used_at.is_(None),
        PushActionTokenRow.expires_at > bindparam("b_now"),
    )
    .values(used_at=bindparam("b_now"))
    .execution_options(synchronize_session=False)
)


def _refused(why: str) -> BadToken:
    return BadToken(f"this notification's action token {why}; open the request instead")


async def held(s: AsyncSession, token: str, now: datetime) -> Held:
    """The token's request, device and person; BadToken for an unknown token or a
    device whose login no longer works."""
    if not token or len(token) > push.MAX_TOKEN_CHARS:
        raise _refused("is not valid")
    found = (await s.execute(_HELD, {"b_hash": hash_token(token), "b_now": now})).first()
    if found is None:
        raise _refused("is not valid (unknown, or its device was revoked)")
    token_id, request_id, expires, used, device_id, device, user_id, name, admin, row = found
    person = Principal(kind="user", id=user_id, name=name, is_admin=bool(admin))
    return Held(token_id, request_id, device_id, device, expires, used, person, row)


def _choice(row: PermissionRow, action: str, note: str | None, device: str) -> Choice:
    """The decision a notification's action stands for."""
    if row.kind == "approval":
        if action not in ("approve", "deny"):
            raise invalid_value("action", "an approval's action is 'approve' or 'deny'")
        return Choice(action, note, channel="push", device=device)
    labels = [str(o["label"]) for o in row.options or []]
    if action not in labels:
        known = ", ".join(repr(label) for label in labels) or "none (a free-text question)"
        raise invalid_value(
            "action", f"{action!r} is not one of this question's options; they are: {known}"
        )
    return Choice("approve", note, answers=[action], channel="push", device=device)


async def act(s: AsyncSession, token: str, action: str, note: str | None) -> PermissionOut:
    """Decide the token's request as its device's person (see the module text;
    steps 2 to 5 are services/token_decisions.py's, shared with e-mail links)."""
    now = utcnow()
    got = await held(s, token, now)

    async def claim() -> bool:
        claimed = await s.execute(_USE, {"b_id": got.token_id, "b_now": now})
        return bool(claimed.rowcount)  # type: ignore[attr-defined]

    return await token_decisions.decide_once(
        s,
        got.person,
        got.request,
        used_at=got.used_at,
        expires_at=got.expires_at,
        now=now,
        choice=lambda: _choice(got.request, action, note, got.device_name),
        claim=claim,
        refused=_refused,
    )


_RECEIPT_SEEN = select(RequestDeliveryRow.id).where(
    RequestDeliveryRow.request_id == bindparam("b_request"),
    RequestDeliveryRow.device_id == bindparam("b_device"),
    RequestDeliveryRow.state == bindparam("b_state"),
)


async def receipt(s: AsyncSession, token: str, state: str) -> bool:
    """Record that the token's notification was shown or opened on its device;
    False when that was recorded before (nothing written)."""
    if state not in RECEIPT_STATES:
        raise invalid_value("state", "state is 'shown' or 'opened'")
    now = utcnow()
    got = await held(s, token, now)
    params = {"b_request": got.request_id, "b_device": got.device_id, "b_state": state}
    if (await s.execute(_RECEIPT_SEEN.limit(1), params)).first() is not None:
        return False
    await s.execute(
        insert(RequestDeliveryRow).values(
            request_id=got.request_id,
            channel="push",
            person=got.person.name,
            device_id=got.device_id,
            device_name=got.device_name,
            state=state,
            detail=None,
            latency_us=None,
            at=now,
        )
    )
    return True


# -- a request's deliveries ----------------------------------------------------------------

MAX_DELIVERIES = 500


async def deliveries(s: AsyncSession, who: Principal, request_id: str) -> list[DeliveryOut]:
    """What happened to the request on each channel and device, in time order (the
    sender and the request write from different transactions: ids are not), for a
    decider of its session: others get what deciding would answer (404 for who
    may not read the session, 403 for a reader without the power — an admin who
    is not a decider, a person cc'd in; docs/access.md).
    Its settlement (decided, expired, cancelled) is an entry made from the
    request itself, at its time: deciding writes no delivery row of its own."""
    what = f"permission request '{request_id}'"
    row = await s.get(PermissionRow, request_id)
    if row is None:
        raise not_found(what)
    await access.Reader(who).ensure_decide(s, await get_session(s, row.session_id), what)
    rows = await s.scalars(
        select(RequestDeliveryRow)
        .where(RequestDeliveryRow.request_id == request_id)
        .order_by(RequestDeliveryRow.at, RequestDeliveryRow.id)
        .limit(MAX_DELIVERIES)
    )
    out = [
        DeliveryOut(
            channel=d.channel,
            person=d.person,
            device=d.device_name,
            state=d.state,
            detail=d.detail,
            at=d.at,
            latency_ms=None if d.latency_us is None else round(d.latency_us / 1000, 1),
        )
        for d in rows
    ]
    if row.status != "pending" and row.decided_at is not None:
        # In time order: after what happened before it, before the pushes that
        # withdrew the notifications (written after it, in its transaction).
        at = row.decided_at
        place = next((i for i, d in enumerate(out) if d.at > at), len(out))
        out.insert(
            place,
            DeliveryOut(
                channel=row.decided_channel or "system",
                person=None if (row.decided_by or "").startswith("grant:") else row.decided_by,
                device=row.decided_device,
                state="decided" if row.status in ("approved", "denied") else "withdrawn",
                detail=_outcome(row),
                at=at,
            ),
        )
    return out


def _outcome(row: PermissionRow) -> str:
    """The settlement's detail: "approved", "denied: not on a Friday", "answered:
    us", "timed out", "cancelled by bob"."""
    if row.status not in ("approved", "denied"):
        return push.settled_text(row)
    word = "answered" if row.kind == "question" and row.status == "approved" else row.status
    said = ", ".join(row.answers or []) if word == "answered" else row.note
    return f"{word}: {said}" if said else word
