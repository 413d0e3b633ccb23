"""Typed dependencies: the gateway state and who is calling."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from mailui4agents.domain.errors import forbidden
from mailui4agents.errors import ApiError
from mailui4agents.http import web_session
from mailui4agents.services import identity
from mailui4agents.services.principals import Principal
from mailui4agents.services.push_subscriptions import Login
from mailui4agents.state import Gateway


async def gateway(request: Request) -> Gateway:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread
    # hop on every request (seen in bench/delivery.py --profile).
    gw: Gateway = request.app.state.gateway
    return gw


GatewayDep = Annotated[Gateway, Depends(gateway)]


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def bearer_token(request: Request) -> str:
    """The token of an `Authorization: Bearer` header ('' when there is none)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def principal(request: Request) -> Principal:
    """Whoever the bearer token belongs to. 401 is permanent: do not retry.

    A key revoked by any process (`agentmail admin`, another replica) fails at
    its next request: on PostgreSQL it is read on every request; on SQLite its
    cached principal dies with the auth epoch (services/identity.py,
    `authenticate_in`; db/auth_epoch.py)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("missing 'Authorization: Bearer <token>' header")
    gw: Gateway = request.app.state.gateway  # not GatewayDep: one dependency fewer to solve
    found = await identity.authenticate_in(gw.db, token)
    if found is None:
        raise _unauthorized("invalid or revoked token")
    who = found[0]
    # An event stream ends when its token does: it takes the end from here
    # rather than looking the token up again (api/events.py, http/event_stream.py).
    request.state.token_until = (token, found[1])
    claimed = request.headers.get("x-agent-name") or request.query_params.get("agent")
    if who.kind == "agent" and claimed and claimed != who.name:
        raise forbidden(f"this key is bound to agent '{who.name}', not '{claimed}'")
    return who


# human, agent and admin call principal rather than depend on it: one
# dependency for FastAPI to solve per request instead of two or three. A route
# takes exactly one of Human, Agent, Admin, Anyone or PageOrToken.


async def human(request: Request) -> Principal:
    who = await principal(request)
    if who.kind != "user":
        raise forbidden("agent keys cannot use human routes")
    return who


async def agent(request: Request) -> Principal:
    who = await principal(request)
    if who.kind != "agent":
        raise forbidden("this route is for agents (am_agent_… keys)")
    return who


async def admin(request: Request) -> Principal:
    who = await human(request)
    identity.require_admin(who)
    return who


async def page_or_token(request: Request) -> Login:
    """A person by bearer token, or by web session cookie plus X-CSRF-Token: the
    routes a page calls with its cookie (api/push.py, api/notify.py). A cookie
    alone is what a cross-site request carries; the token is what it cannot."""
    if request.headers.get("authorization"):
        return Login(await human(request), bearer_token(request), web_session=False)
    token = request.cookies.get(web_session.SESSION_COOKIE, "")
    if not token:
        raise _unauthorized("missing 'Authorization: Bearer <token>' header or web session")
    gw: Gateway = request.app.state.gateway
    found = await identity.authenticate_in(gw.db, token)
    if found is None:
        raise ApiError(401, "unauthorized", "the web session has ended: log in again")
    who = found[0]
    if who.kind != "user":
        raise forbidden("agent keys cannot use human routes")
    if not web_session.csrf_ok(request, token, None):
        raise forbidden("a web session's request needs the page's X-CSRF-Token header")
    return Login(who, token, web_session=True)


Human = Annotated[Principal, Depends(human)]
Agent = Annotated[Principal, Depends(agent)]
Admin = Annotated[Principal, Depends(admin)]
Anyone = Annotated[Principal, Depends(principal)]
PageOrToken = Annotated[Login, Depends(page_or_token)]
