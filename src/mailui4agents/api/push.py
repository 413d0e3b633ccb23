"""Web Push routes (docs/remote.md, "Push"): the VAPID public key, subscriptions,
a test push, the sender's counters.

Subscribing is what a page does in a browser, so besides `Authorization: Bearer`
the routes take the web session cookie, with the page's CSRF token in
`X-CSRF-Token` (web/auth.py: a cookie alone is what a cross-site request would
carry; the token is what it cannot). Agents: 403. The rules are in
services/push_subscriptions.py; the endpoint rule in services/push_endpoints.py.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from mailui4agents.api.deps import Admin, GatewayDep, PageOrToken
from mailui4agents.api.validation import StrictBody
from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import devices, push_send, push_subscriptions
from mailui4agents.services.push_endpoints import MAX_ENDPOINT, EndpointRefused, check_endpoint
from mailui4agents.wire.models import Revoked
from mailui4agents.wire.push import (
    PushStatsOut,
    PushTestOut,
    PushTestResult,
    SubscriptionOut,
    VapidKeyOut,
)

router = APIRouter(prefix="/api/v1/push", tags=["push"])

TEST_WAIT_S = 15.0  # how long POST /push/test waits for the push services' answers


class SubscriptionKeys(StrictBody):
    p256dh: str = Field(min_length=1, max_length=200)
    auth: str = Field(min_length=1, max_length=100)


class SubscriptionIn(StrictBody):
    """A browser's `PushSubscription.toJSON()` (`expirationTime` is accepted and
    ignored) plus, for a login that is not a paired device's, the new device's name."""

    endpoint: str = Field(min_length=1, max_length=MAX_ENDPOINT)
    keys: SubscriptionKeys
    device_name: str | None = Field(default=None, min_length=1, max_length=devices.MAX_NAME)
    expirationTime: float | None = None  # the browser's own field name


@router.get("/vapid-public-key", response_model=VapidKeyOut)
async def vapid_public_key(gw: GatewayDep) -> VapidKeyOut:
    """The key a page subscribes with (no login needed: it is public)."""
    assert gw.push is not None
    return VapidKeyOut(key=gw.push.key.public_b64)


@router.post("/subscriptions", status_code=201, response_model=SubscriptionOut)
async def subscribe(body: SubscriptionIn, login: PageOrToken, gw: GatewayDep) -> SubscriptionOut:
    """Store this device's subscription (replacing its previous one). 400
    `endpoint` for an endpoint the gateway may not POST to: https to public
    addresses only, or one of `agentmail serve --push-endpoint-allow`."""
    try:
        await check_endpoint(body.endpoint, gw.settings.push_endpoint_allow)
    except EndpointRefused as exc:
        raise invalid_value("endpoint", str(exc)) from None
    async with gw.write() as s:
        sub_id, device_id = await push_subscriptions.subscribe(
            s,
            login,
            endpoint=body.endpoint,
            p256dh=body.keys.p256dh,
            auth=body.keys.auth,
            device_name=body.device_name,
        )
    return SubscriptionOut(id=sub_id, device_id=device_id)


@router.delete("/subscriptions/{subscription_id}", response_model=Revoked)
async def unsubscribe(subscription_id: str, login: PageOrToken, gw: GatewayDep) -> Revoked:
    """Delete a subscription of one of your devices (anyone else's: 404)."""
    async with gw.write() as s:
        await push_subscriptions.unsubscribe(s, login.who, subscription_id)
    return Revoked(revoked=subscription_id)


@router.post("/test", response_model=PushTestOut)
async def test_push(login: PageOrToken, gw: GatewayDep) -> PushTestOut:
    """A test push to each of your devices with a subscription; waits (up to
    15 s) for each push service's answer. No such device: an empty list."""
    assert gw.push is not None
    async with gw.write() as s:
        targets = await push_subscriptions.targets(s, login.who)
        queued = [
            await push_send.enqueue(
                s,
                subscription_id=t.subscription_id,
                request_id=None,
                kind="test",
                payload={
                    "type": "test",
                    "title": "agentmail: test notification",
                    "body": f"Push to {t.device_name} works.",
                    "tag": f"test-{t.device_id}",
                    "url": "/devices",
                },
                person=login.who.name,
                device_id=t.device_id,
                device_name=t.device_name,
            )
            for t in targets
        ]
    results = await gw.push.wait_final(queued, TEST_WAIT_S) if queued else {}
    return PushTestOut(
        items=[
            PushTestResult(
                device_id=t.device_id,
                device_name=t.device_name,
                status_code=results[oid].status_code,
                detail=results[oid].detail,
                latency_ms=results[oid].latency_ms,
            )
            for t, oid in zip(targets, queued, strict=True)
        ]
    )


@router.get("/stats", response_model=PushStatsOut)
async def stats(who: Admin, gw: GatewayDep) -> PushStatsOut:
    """This process's push outcomes since it started (admins)."""
    assert gw.push is not None
    return PushStatsOut(counts=dict(gw.push.counts))
