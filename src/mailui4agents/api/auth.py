"""Login and personal API tokens."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.schemas import LoginIn, TokenCreate
from mailui4agents.services import identity

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


@router.post("/login")
async def login(body: LoginIn, gw: GatewayDep) -> dict[str, Any]:
    async with gw.write() as s:
        user = await identity.verify_password(s, gw.hasher, body.username, body.password)
        token = await identity.issue_user_token(s, user.id, "login")
    return {"token": token, "user": {"username": user.username, "is_admin": user.is_admin}}


@router.post("/tokens", status_code=201)
async def create_token(body: TokenCreate, who: Human, gw: GatewayDep) -> dict[str, Any]:
    async with gw.write() as s:
        token = await identity.issue_user_token(s, who.id, body.name)
    return {"token": token, "name": body.name}
