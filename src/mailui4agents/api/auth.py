"""Login and personal API tokens."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from mailui4agents.api.deps import GatewayDep, Human, bearer_token
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import LoginIn, TokenCreate
from mailui4agents.services import identity

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.post("/login")
async def login(body: LoginIn, gw: GatewayDep) -> dict[str, Any]:
    async with gw.write() as s:
        user = await identity.verify_password(s, gw.hasher, body.username, body.password)
        token = await identity.issue_user_token(
            s, user.id, "login", ttl_s=gw.settings.login_token_ttl_s
        )
    return {"token": token, "user": {"username": user.username, "is_admin": user.is_admin}}


@router.post("/tokens", status_code=201)
async def create_token(body: TokenCreate, who: Human, gw: GatewayDep) -> dict[str, Any]:
    async with gw.write() as s:
        token = await identity.issue_user_token(s, who.id, body.name)
    return {"token": token, "name": body.name}


@router.get("/tokens")
async def list_tokens(request: Request, who: Human, gw: GatewayDep) -> dict[str, Any]:
    """The caller's own usable tokens (login and named), newest first; `current`
    marks the one this request carries. Secrets are never shown again."""
    async with gw.read() as s:
        items = await identity.list_user_tokens(s, who.id, bearer_token(request))
    return page(items, None)


@router.delete("/tokens/{token_id}")
async def revoke_token(token_id: str, who: Human, gw: GatewayDep) -> dict[str, Any]:
    """Revoke one of the caller's tokens (another user's token: 404). Its open
    streams end at once."""
    async with gw.write() as s:
        await identity.revoke_user_token(s, who, token_id)
    return {"revoked": token_id}
