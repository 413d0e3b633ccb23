"""Login and personal API tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request

from mailui4agents.api.deps import GatewayDep, Human, bearer_token
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import LoginIn, TokenCreate
from mailui4agents.errors import ApiError
from mailui4agents.services import identity, logins
from mailui4agents.wire.models import LoginOut, Page, Revoked, TokenCreated, TokenOut

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.post("/login", response_model=LoginOut)
async def login(body: LoginIn, request: Request, gw: GatewayDep) -> LoginOut:
    """Attempts are limited per username and per client address (429 with
    Retry-After, services/rate_limits.py); the use case is services/logins.py."""
    address = request.client.host if request.client is not None else "unknown"
    done = await logins.log_in(
        gw,
        body.username,
        body.password,
        address,
        token_name="login",
        ttl_s=gw.settings.login_token_ttl_s,
    )
    if done is None:
        raise ApiError(401, "unauthorized", logins.WRONG_PASSWORD)
    return LoginOut(token=done.token, user=done.user)


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
