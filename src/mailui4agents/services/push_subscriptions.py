"""Push subscriptions (docs/remote.md, "Push"): one per device, replaced on re-subscribe.

Which device a subscription belongs to follows from the login that makes it:

- a paired device's web session (its cookie holds the device's token,
  services/devices.py): that device;
- a password web login in a browser that is not a device yet: `device_name` is
  required and the browser BECOMES that device — the device row is bound to the
  web session's own token, exactly as pairing binds a device to the token it
  makes. Logging out there (or revoking the device) ends both at once, which is
  right: the subscription lives in that browser and nowhere else;
- a person's API token (a CLI login, a named token): `device_name` names a new
  device of that person. Its row needs a token of its own (`devices.token_id`:
  revoking a device revokes its token, and binding it to the API token would
  let "revoke this phone" revoke the person's CLI login). So a token is made for
  the device alone: named after it, without expiry, its secret never shown to
  anyone (only the hash is stored): nobody can log in with it; it exists so
  the device is listed, revocable and dies the usual way.
"""

from __future__ import annotations

import hmac
import unicodedata
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import DeviceRow, PushSubscriptionRow
from mailui4agents.db.tables import UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import invalid_value, not_found
from mailui4agents.services import devices
from mailui4agents.services.identity import USER_TOKEN_PREFIX, hash_token, new_secret
from mailui4agents.services.principals import Principal
from mailui4agents.services.push_keys import b64url_decode

P256DH_BYTES = 65  # an uncompressed P-256 point: 0x04 || X || Y
AUTH_BYTES = 16  # RFC 8291: the browser's auth secret
MAX_DEVICES = 50  # devices one person may have (each may hold one subscription)


def check_keys(p256dh: str, auth: str) -> None:
    """The browser's key and secret, or Invalid naming the field."""
    try:
        point = b64url_decode(p256dh)
    except ValueError:
        raise invalid_value("keys.p256dh", "keys.p256dh must be base64url") from None
    if len(point) != P256DH_BYTES or point[0] != 4:
        raise invalid_value(
            "keys.p256dh",
            f"keys.p256dh must be an uncompressed P-256 point ({P256DH_BYTES} bytes, "
            f"got {len(point)})",
        )
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        raise invalid_value("keys.p256dh", "keys.p256dh is not a point on P-256") from None
    try:
        secret = b64url_decode(auth)
    except ValueError:
        raise invalid_value("keys.auth", "keys.auth must be base64url") from None
    if len(secret) != AUTH_BYTES:
        raise invalid_value(
            "keys.auth", f"keys.auth must be {AUTH_BYTES} bytes (got {len(secret)})"
        )


@dataclass(frozen=True)
class Login:
    """Who subscribes, with the token they came with and how (cookie or bearer)."""

    who: Principal
    token: str
    web_session: bool


async def _device_of(s: AsyncSession, login: Login) -> DeviceRow | None:
    row: DeviceRow | None = await s.scalar(
        select(DeviceRow)
        .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
        .where(
            UserTokenRow.token_hash == hash_token(login.token),
            DeviceRow.user_id == login.who.id,
        )
    )
    return row


async def _new_device(s: AsyncSession, login: Login, device_name: str | None) -> DeviceRow:
    if device_name is None:
        raise invalid_value(
            "device_name",
            "device_name is required: this login is not a paired device's, so the "
            "subscription makes a new device of yours, and it needs a name",
        )
    name = devices.clean_name(device_name, "device_name")
    count = await s.scalar(select(func.count()).where(DeviceRow.user_id == login.who.id))
    if (count or 0) >= MAX_DEVICES:
        raise invalid_value(
            "device_name", f"you have {MAX_DEVICES} devices already: revoke one first"
        )
    now = utcnow()
    if login.web_session:
        token_id = await s.scalar(
            select(UserTokenRow.id).where(UserTokenRow.token_hash == hash_token(login.token))
        )
        assert token_id is not None  # the request was authenticated with it
    else:
        anchor = UserTokenRow(
            user_id=login.who.id,
            name=name,
            token_hash=hash_token(new_secret(USER_TOKEN_PREFIX)),  # the secret is dropped
            created_at=now,
        )
        s.add(anchor)
        await s.flush()
        token_id = anchor.id
    row = DeviceRow(
        user_id=login.who.id, name=name, token_id=token_id, created_at=now, last_seen_at=now
    )
    s.add(row)
    await s.flush()
    return row


async def subscribe(
    s: AsyncSession,
    login: Login,
    *,
    endpoint: str,
    p256dh: str,
    auth: str,
    device_name: str | None,
) -> tuple[str, str]:
    """Store the subscription for the login's device (made now if needed), replacing
    the device's previous one; (subscription id, device id). The endpoint is checked
    by the caller before (services/push_endpoints.py: it resolves DNS, which must not
    happen inside a write transaction)."""
    check_keys(p256dh, auth)
    if device_name is not None:
        device_name = unicodedata.normalize("NFC", device_name)
    device = await _device_of(s, login)
    if device is None:
        device = await _new_device(s, login, device_name)
    # One per device: the old one goes, with the pushes still queued for it.
    await s.execute(delete(PushSubscriptionRow).where(PushSubscriptionRow.device_id == device.id))
    # The same browser subscription on another of the person's devices: only here now.
    mine = select(DeviceRow.id).where(DeviceRow.user_id == login.who.id)
    await s.execute(
        delete(PushSubscriptionRow).where(
            PushSubscriptionRow.endpoint == endpoint, PushSubscriptionRow.device_id.in_(mine)
        )
    )
    row = PushSubscriptionRow(
        device_id=device.id, endpoint=endpoint, p256dh=p256dh, auth=auth, created_at=utcnow()
    )
    s.add(row)
    device.push_notice = None  # pushing works again
    await s.flush()
    return row.id, device.id


async def renew(
    s: AsyncSession, *, old_endpoint: str, old_auth: str, endpoint: str, p256dh: str, auth: str
) -> str | None:
    """The browser replaced a subscription (`pushsubscriptionchange`, static/sw.js):
    the row of the old one takes the new endpoint and keys, in place, for the same
    device. No login: the old endpoint together with its 16-byte auth secret — which
    only that browser and the gateway hold — is the credential. A device's id, or
    None when no live device's subscription matches (the caller counts a bad guess).
    The new endpoint is checked by the caller first, as for `subscribe`."""
    check_keys(p256dh, auth)
    rows = await s.scalars(
        select(PushSubscriptionRow).where(PushSubscriptionRow.endpoint == old_endpoint)
    )
    # One browser subscription can be held by two people's devices (a shared
    # browser, logged in by each in turn): each keeps it.
    renewed: str | None = None
    for row in rows.all():
        if not hmac.compare_digest(row.auth.encode(), old_auth.encode()):
            continue
        device = await s.get(DeviceRow, row.device_id)
        assert device is not None  # the foreign key cascades
        live = await s.scalar(
            devices.live_device_ids(device.user_id, utcnow()).where(DeviceRow.id == device.id)
        )
        if live is None:  # revoked or logged out: its subscription is dead too
            continue
        row.endpoint, row.p256dh, row.auth, row.last_ok_at = endpoint, p256dh, auth, None
        device.push_notice = None
        renewed = renewed or device.id
    await s.flush()
    return renewed


async def unsubscribe(s: AsyncSession, who: Principal, subscription_id: str) -> None:
    """Delete one of the caller's devices' subscriptions; anyone else's is NotFound."""
    row = await s.scalar(
        select(PushSubscriptionRow)
        .join(DeviceRow, DeviceRow.id == PushSubscriptionRow.device_id)
        .where(PushSubscriptionRow.id == subscription_id, DeviceRow.user_id == who.id)
    )
    if row is None:
        raise not_found(f"push subscription '{subscription_id}'")
    await s.delete(row)
    await s.flush()


@dataclass(frozen=True)
class Target:
    subscription_id: str
    device_id: str
    device_name: str


async def targets(s: AsyncSession, who: Principal) -> list[Target]:
    """The caller's working devices that have a subscription."""
    rows = await s.execute(
        select(PushSubscriptionRow.id, DeviceRow.id, DeviceRow.name)
        .join(DeviceRow, DeviceRow.id == PushSubscriptionRow.device_id)
        .where(DeviceRow.id.in_(devices.live_device_ids(who.id, utcnow())))
        .order_by(DeviceRow.created_at, DeviceRow.id)
    )
    return [Target(sid, did, name) for sid, did, name in rows]
