"""Logging in and an admin's changes to a login: the use cases the API routes
(api/auth.py, api/admin.py) and the web pages (web/data.py) share.

They take the gateway, not one session: each spans a read, an Argon2 hash in a
worker thread with no transaction open, and then the one writer
(services/rate_limits.py limits login attempts per username and client address)."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from mailui4agents.domain.errors import not_found
from mailui4agents.services import identity
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import LoginUser, UserOut

WRONG_PASSWORD = "wrong username or password"


@dataclass(frozen=True)
class LoggedIn:
    """A fresh token for a correct password, and whose it is."""

    token: str
    user: LoginUser


async def log_in(
    gw: Gateway, username: str, password: str, address: str, *, token_name: str, ttl_s: float
) -> LoggedIn | None:
    """A token named `token_name` expiring after `ttl_s` for a correct password;
    None for a wrong one (the adapters answer 401: WRONG_PASSWORD). RateLimited
    past the limits of services/rate_limits.py."""
    attempt = gw.logins.begin(username, address)
    async with gw.read() as s:
        user = await identity.user_by_name(s, username)
    stored = None if user is None else user.password_hash
    async with gw.hash_slots:
        ok = await anyio.to_thread.run_sync(identity.password_matches, gw.hasher, stored, password)
    if not ok or user is None:
        return None
    attempt.succeeded()
    async with gw.write() as s:
        token = await identity.issue_user_token(s, user.id, token_name, ttl_s=ttl_s)
    return LoggedIn(token, LoginUser(username=user.username, is_admin=user.is_admin))


async def reset_password(
    gw: Gateway, who: Principal, token: str, username: str, password: str
) -> UserOut:
    """A new password for `username`, set by an admin; its logins end (the
    admin's own `token`, when it resets itself, stays). 404 `username` for an
    unknown user, 400 `password` for a bad one. Hashed in a worker thread,
    outside the write transaction."""
    identity.check_password(password)
    async with gw.read() as s:
        if await identity.user_by_name(s, username) is None:
            raise not_found(f"user '{username}'", field="username")
    async with gw.hash_slots:
        hashed = await anyio.to_thread.run_sync(gw.hasher.hash, password)
    async with gw.write() as s:
        keep = token if username == who.name else None
        return await identity.reset_password(s, username, hashed, keep_token=keep)


async def set_admin(gw: Gateway, username: str, is_admin: bool) -> UserOut:
    """Make `username` an admin or take it back (the last admin stays one: 409)."""
    async with gw.write() as s:
        return await identity.set_admin(s, username, is_admin)
