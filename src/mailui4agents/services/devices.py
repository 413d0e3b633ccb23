"""Devices: phones and browsers paired by QR (docs/web.md, "Pairing a phone").

A pairing is a one-time code of 256 random bits (`secrets.token_urlsafe(32)`)
for one user and one device name. Only its SHA-256 is stored; it is used once
(a conditional UPDATE sets `used_at`, so two browsers racing with the same code
cannot both win) and expires after PAIRING_TTL_S. Using it creates a user token
named after the device, expiring like any web session (web_session_ttl_s), and
a device row naming that token: revoking the device revokes the token, so the
device's cookie stops working at its next request (identity.authenticate_in:
read on every request, or on SQLite cached until the auth epoch changes).

Guessing codes is limited per client address with the login limiter
(services/rate_limits.LoginGuard): a failed redemption counts as a failed login
from that address, so codes and passwords share one budget per address.
"""

from __future__ import annotations

import secrets
import time
import unicodedata
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.engine import Database
from mailui4agents.db.reach_tables import DevicePairingRow, DeviceRow, PushSubscriptionRow
from mailui4agents.db.tables import UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import forbidden, invalid_value, not_found
from mailui4agents.services.identity import USER_TOKEN_PREFIX, hash_token, new_secret
from mailui4agents.services.principals import Principal
from mailui4agents.services.rate_limits import LoginGuard, refuse_over
from mailui4agents.wire.devices import DeviceOut

PAIRING_TTL_S = 300.0  # a code works for five minutes
CODE_BYTES = 32  # 256 bits: far beyond guessing, even without the limiter
MAX_CODE_CHARS = 100  # anything longer is not one of ours (and is not hashed)
MAX_NAME = 100
SEEN_EVERY_S = 60.0  # last_seen_at is written at most this often per device
KEEP_USED_S = 86400.0  # pairings are deleted a day after they ended


def clean_name(name: str, field: str = "name") -> str:
    """A device name as stored: trimmed, NFC, 1-100 characters, no control characters."""
    value = unicodedata.normalize("NFC", name.strip())
    if not value or len(value) > MAX_NAME:
        raise invalid_value(field, f"{field} must be 1-{MAX_NAME} characters")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        raise invalid_value(field, f"{field} must not contain control characters")
    return value


async def create_pairing(
    s: AsyncSession, who: Principal, name: str, user: str | None = None
) -> tuple[str, datetime, UserRow]:
    """A new one-time code (shown once, never stored) for a device of `user`
    (admins only, for someone else) or of the caller; its expiry; the user."""
    device_name = clean_name(name)
    target = who.name if user is None else user
    if target != who.name and not who.is_admin:
        raise forbidden("only admins pair a device for another person")
    row = await s.scalar(select(UserRow).where(UserRow.username == target))
    if row is None:
        raise invalid_value("user", f"no user is named '{target}'")
    now = utcnow()
    # Pairings long over are of no use to anyone: keep the table small.
    await s.execute(
        delete(DevicePairingRow).where(
            DevicePairingRow.expires_at < now - timedelta(seconds=KEEP_USED_S)
        )
    )
    code = secrets.token_urlsafe(CODE_BYTES)
    expires = now + timedelta(seconds=PAIRING_TTL_S)
    s.add(
        DevicePairingRow(
            code_hash=hash_token(code),
            user_id=row.id,
            name=device_name,
            created_by=who.name,
            created_at=now,
            expires_at=expires,
        )
    )
    await s.flush()
    return code, expires, row


def _usable(now: datetime) -> ColumnElement[bool]:
    return and_(DevicePairingRow.used_at.is_(None), DevicePairingRow.expires_at > now)


async def peek(s: AsyncSession, code: str) -> tuple[str, str] | None:
    """(username, device name) of a code that is still usable, without using it;
    None for an unknown, used or expired code."""
    if not code or len(code) > MAX_CODE_CHARS:
        return None
    found = (
        await s.execute(
            select(UserRow.username, DevicePairingRow.name)
            .join(UserRow, UserRow.id == DevicePairingRow.user_id)
            .where(DevicePairingRow.code_hash == hash_token(code), _usable(utcnow()))
        )
    ).first()
    return None if found is None else (found[0], found[1])


async def redeem(s: AsyncSession, code: str, ttl_s: float) -> str | None:
    """Use a code: a new web session token for its user, named after the device,
    and the device row; None (nothing written) for an unknown, used or expired code."""
    if not code or len(code) > MAX_CODE_CHARS:
        return None
    now = utcnow()
    pairing = await s.scalar(
        select(DevicePairingRow).where(DevicePairingRow.code_hash == hash_token(code))
    )
    if pairing is None:
        return None
    claimed = await s.execute(
        update(DevicePairingRow)
        .where(DevicePairingRow.id == pairing.id, _usable(now))
        .values(used_at=now)
    )
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        return None  # used (perhaps a moment ago, by another browser) or expired
    token = new_secret(USER_TOKEN_PREFIX)
    login = UserTokenRow(
        user_id=pairing.user_id,
        name=pairing.name,
        token_hash=hash_token(token),
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    s.add(login)
    await s.flush()
    s.add(
        DeviceRow(
            user_id=pairing.user_id,
            name=pairing.name,
            token_id=login.id,
            created_at=now,
            last_seen_at=now,
        )
    )
    await s.flush()
    return token


def _live_devices(user_id: str, now: datetime) -> Select[Any]:
    """The user's devices whose web session still works."""
    return (
        select(DeviceRow)
        .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
        .where(
            DeviceRow.user_id == user_id,
            UserTokenRow.revoked_at.is_(None),
            or_(UserTokenRow.expires_at.is_(None), UserTokenRow.expires_at > now),
        )
    )


def live_device_ids(user_id: str, now: datetime) -> Select[Any]:
    """The ids of the user's devices whose web session still works (a subquery)."""
    return _live_devices(user_id, now).with_only_columns(DeviceRow.id)


@dataclass(frozen=True)
class ThisDevice:
    """The paired device a web session token belongs to."""

    id: str
    name: str
    subscription_id: str | None  # its push subscription, if it has one


_BY_TOKEN = (
    select(DeviceRow.id, DeviceRow.name, PushSubscriptionRow.id)
    .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
    .outerjoin(PushSubscriptionRow, PushSubscriptionRow.device_id == DeviceRow.id)
    .where(UserTokenRow.token_hash == bindparam("b_digest"))
)


async def this_device(s: AsyncSession, token: str) -> ThisDevice | None:
    """The device whose web session `token` is (None: a password login, which is
    no device). The web decision records its name (web/data.decide), as a
    push action records the pushed device's (services/push_actions.py)."""
    found = (await s.execute(_BY_TOKEN, {"b_digest": hash_token(token)})).first()
    return None if found is None else ThisDevice(found[0], found[1], found[2])


def device_out(row: DeviceRow, push: bool = False) -> DeviceOut:
    return DeviceOut(
        id=row.id,
        name=row.name,
        created_at=row.created_at,
        last_seen_at=row.last_seen_at,
        push=push,
        push_notice=row.push_notice,
    )


async def list_devices(s: AsyncSession, who: Principal) -> list[DeviceOut]:
    """The caller's devices that still work, newest first; `push`: it has a push
    subscription (services/push_subscriptions.py)."""
    rows = list(
        await s.scalars(
            _live_devices(who.id, utcnow()).order_by(DeviceRow.created_at.desc(), DeviceRow.id)
        )
    )
    subscribed = set(
        await s.scalars(
            select(PushSubscriptionRow.device_id).where(
                PushSubscriptionRow.device_id.in_([r.id for r in rows])
            )
        )
    )
    return [device_out(r, r.id in subscribed) for r in rows]


async def _own(s: AsyncSession, who: Principal, device_id: str) -> DeviceRow:
    """One of the caller's working devices; anyone else's is NotFound (ids of
    other people's devices are not confirmed: admins included)."""
    row: DeviceRow | None = await s.scalar(
        _live_devices(who.id, utcnow()).where(DeviceRow.id == device_id)
    )
    if row is None:
        raise not_found(f"device '{device_id}'")
    return row


async def rename_device(s: AsyncSession, who: Principal, device_id: str, name: str) -> DeviceOut:
    row = await _own(s, who, device_id)
    row.name = clean_name(name)
    await s.execute(
        update(UserTokenRow).where(UserTokenRow.id == row.token_id).values(name=row.name)
    )
    await s.flush()
    return device_out(row)


async def revoke_device(s: AsyncSession, who: Principal, device_id: str) -> None:
    """Revoke the device's web session token and forget the device. Its cookie is
    refused at its next request; its open streams re-check after the commit."""
    row = await _own(s, who, device_id)
    await s.execute(
        update(UserTokenRow)
        .where(UserTokenRow.id == row.token_id, UserTokenRow.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    await s.delete(row)
    await s.flush()
    s.info.setdefault("recheck", set()).add(who.key)


_SEEN = (
    select(DeviceRow.id, DeviceRow.last_seen_at)
    .join(UserTokenRow, UserTokenRow.id == DeviceRow.token_id)
    .where(UserTokenRow.token_hash == bindparam("digest"))
)


class _SeenMemo:
    """Per database, in this process: tokens known not to be a device's (a token
    becomes a device's only when it is made, so the answer never changes), and
    when each device token's last_seen_at was last written. Bounded: the least
    recently used are forgotten first (and merely looked up again)."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self.not_devices: OrderedDict[str, None] = OrderedDict()
        self.written: OrderedDict[str, float] = OrderedDict()

    @staticmethod
    def _put(memo: OrderedDict[str, Any], key: str, value: Any, max_keys: int) -> None:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > max_keys:
            memo.popitem(last=False)


_SEEN_MEMO: weakref.WeakKeyDictionary[Database, _SeenMemo] = weakref.WeakKeyDictionary()


async def seen(db: Database, token: str) -> None:
    """Note that this web session token was just used: its device's last_seen_at
    becomes now, written at most every SEEN_EVERY_S per device. Most requests cost
    a dictionary look-up; a token's first request in this process one read."""
    memo = _SEEN_MEMO.get(db)
    if memo is None:
        memo = _SEEN_MEMO[db] = _SeenMemo()
    digest = hash_token(token)
    if digest in memo.not_devices:
        return
    clock = time.monotonic()
    last = memo.written.get(digest)
    if last is not None and clock - last < SEEN_EVERY_S:
        return
    rows = await db.read_rows(_SEEN, {"digest": digest})
    if not rows:
        memo._put(memo.not_devices, digest, None, memo.max_keys)
        return
    memo._put(memo.written, digest, clock, memo.max_keys)
    stored, now = rows[0].last_seen_at, utcnow()
    if stored is not None and stored > now - timedelta(seconds=SEEN_EVERY_S):
        return  # written lately (by another process, or before a restart)
    async with db.write() as s:
        await s.execute(
            update(DeviceRow).where(DeviceRow.id == rows[0].id).values(last_seen_at=now)
        )


# --- guessing limits: the login limiter's per-address windows -------------------


def begin_guess(guard: LoginGuard, address: str) -> float:
    """Refuse (RateLimited) a code from an address over the login limits; else
    count it as a failure (until `guess_succeeded`) and return its stamp."""
    refuse_over(
        [(guard.address_failures, address), (guard.address_attempts, address)],
        "pairing or login attempts from this address",
    )
    guard.address_attempts.hit(address)
    return guard.address_failures.hit(address)


def guess_succeeded(guard: LoginGuard, address: str, stamp: float) -> None:
    guard.address_failures.undo(address, stamp)
