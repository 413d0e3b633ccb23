"""A notification's actions and receipts (docs/remote.md, "Approving from a
notification"), and a subscription the browser replaced. No login: the action
token the push carried is the credential (services/push_actions.py holds the
rules); for a renewal, the old subscription's endpoint and auth secret. A bad
token is 401 and counts as a failed login of the client address (its budget of
failures shared with logins and pairing codes, docs/limits.md): guessing 256-bit
tokens is hopeless anyway, but nothing unauthenticated goes unlimited."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import Field

from mailui4agents.api.deps import GatewayDep
from mailui4agents.api.push import SubscriptionKeys
from mailui4agents.api.validation import StrictBody
from mailui4agents.domain.errors import invalid_value, not_found
from mailui4agents.errors import ApiError
from mailui4agents.services import push, push_actions, push_subscriptions, size_limits
from mailui4agents.services.push_endpoints import MAX_ENDPOINT, EndpointRefused, check_endpoint
from mailui4agents.services.rate_limits import AddressGuess
from mailui4agents.state import Gateway
from mailui4agents.wire.deliveries import ReceiptOut
from mailui4agents.wire.models import PermissionOut
from mailui4agents.wire.push import RenewOut

router = APIRouter(prefix="/api/v1/push", tags=["push"])


class ActionIn(StrictBody):
    """`action`: "approve" or "deny" for an approval, an option's label for a
    question; `note`: for the agent."""

    token: str = Field(min_length=1, max_length=push.MAX_TOKEN_CHARS)
    action: str = Field(min_length=1, max_length=1000)
    note: str | None = None


class ReceiptIn(StrictBody):
    token: str = Field(min_length=1, max_length=push.MAX_TOKEN_CHARS)
    state: Literal["shown", "opened"]


class RenewIn(StrictBody):
    """What the service worker has on `pushsubscriptionchange`: the old
    subscription's endpoint and auth secret, and the new subscription."""

    old_endpoint: str = Field(min_length=1, max_length=MAX_ENDPOINT)
    old_auth: str = Field(min_length=1, max_length=100)
    endpoint: str = Field(min_length=1, max_length=MAX_ENDPOINT)
    keys: SubscriptionKeys
    expirationTime: float | None = None  # the browser's own field name


def _address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _guess(gw: Gateway, request: Request) -> AddressGuess:
    return AddressGuess(gw.logins, _address(request))


@router.post("/actions", response_model=PermissionOut, response_model_exclude_unset=True)
async def push_action(body: ActionIn, request: Request, gw: GatewayDep) -> PermissionOut:
    """Decide the request of the token's notification as its device's person:
    the PermissionOut; 401 for an unknown, used or expired token or a revoked
    device; 409 `already_decided` when someone was first; 400 `action` that does
    not fit the request."""
    size_limits.check_decision(gw.settings, body.note, None, None)
    guess = _guess(gw, request)
    try:
        async with gw.write() as s:
            return await push_actions.act(s, body.token, body.action, body.note)
    except push_actions.BadToken as bad:
        guess.bad()
        raise ApiError(401, "unauthorized", bad.message) from None


@router.post("/receipts", response_model=ReceiptOut)
async def push_receipt(body: ReceiptIn, request: Request, gw: GatewayDep) -> ReceiptOut:
    """The notification was shown / opened on its device (recorded once per state)."""
    guess = _guess(gw, request)
    try:
        async with gw.write() as s:
            recorded = await push_actions.receipt(s, body.token, body.state)
    except push_actions.BadToken as bad:
        guess.bad()
        raise ApiError(401, "unauthorized", bad.message) from None
    return ReceiptOut(state=body.state, recorded=recorded)


@router.post("/subscriptions/renew", response_model=RenewOut)
async def renew_subscription(body: RenewIn, request: Request, gw: GatewayDep) -> RenewOut:
    """The browser replaced its subscription: the device keeps being pushed, at the
    new endpoint. 404 (a failed login of the address) when the old endpoint and auth
    secret match no live device's subscription; 400 `endpoint` as for subscribing."""
    guess = _guess(gw, request)
    try:
        await check_endpoint(body.endpoint, gw.settings.push_endpoint_allow)
    except EndpointRefused as exc:
        raise invalid_value("endpoint", str(exc)) from None
    async with gw.write() as s:
        device_id = await push_subscriptions.renew(
            s,
            old_endpoint=body.old_endpoint,
            old_auth=body.old_auth,
            endpoint=body.endpoint,
            p256dh=body.keys.p256dh,
            auth=body.keys.auth,
        )
    if device_id is None:
        guess.bad()
        raise not_found("push subscription with that old endpoint and auth secret")
    return RenewOut(device_id=device_id)
