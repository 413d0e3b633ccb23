"""Login and personal API tokens."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Request

from mailui4agents.api.deps import GatewayDep, Human, bearer_token
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import LoginIn, TokenCreate
from mailui4agents.errors import ApiError
from mailui4agents.services import identity
from mailui4agents.wire.models import LoginOut, LoginUser, Page, Revoked, TokenCreated, TokenOut

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.post("/login", response_model=LoginOut)
async def login(body: LoginIn, request: Request, gw: GatewayDep) -> LoginOut:
    """Attempts are limited per username and per client address (429 with
    Retry-After, services/limits.py). The Argon2 check runs in a worker thread
    with no transaction open: only the token insert takes the writer."""
    address = request.client.host if request.client is not None else "unknown"
    attempt = gw.logins.begin(body.username, address)
    async with gw.read() as s:
        user = await identity.user_by_name(s, body.username)
    stored = None if user is None else user.password_hash
    async with gw.hash_slots:
        ok = await anyio.to_thread.run_sync(
            identity.password_matches, gw.hasher, stored, body.password
        )
    if not ok or user is None:
        raise ApiError(401, "unauthorized", "wrong username or password")
    attempt.succeeded()
    async with gw.write() as s:
        token = await identity.issue_user_token(
            s, user.id, "login", ttl_s=gw.settings.login_token_ttl_s
        )
    return LoginOut(token=token, user=LoginUser(username=user.username, is_admin=user.is_admin))


@router.post("/tokens", status_code=201, response_model=TokenCreated)
async def create_token(body: TokenCreate, who: Human, gw: GatewayDep) -> TokenCreated:
    async with gw.write() as s:
        token = await identity.issue_user_token(s, who.id, body.name)
    return TokenCreated(token=token, name=body.name)


@router.get("/tokens", response_model=Page[TokenOut])
async def list_tokens(request: Request, who: Human, gw: GatewayDep) -> Page[TokenOut]:
    """The caller's own usable tokens (login and named), newest first; `current`
    marks the one this request carries. Secrets are never shown again."""
    items = await identity.list_user_tokens_in(gw.db, who.id, bearer_token(request))
    return page(items, None)


@router.delete("/tokens/{token_id}", response_model=Revoked)
async def revoke_token(token_id: str, who: Human, gw: GatewayDep) -> Revoked:
    """Revoke one of the caller's tokens (another user's token: 404). Its open
    streams end at once."""
    async with gw.write() as s:
        await identity.revoke_user_token(s, who, token_id)
    return Revoked(revoked=token_id)
