"""Web Push shapes (docs/remote.md, "Push"): the gateway's VAPID key, a stored
subscription, and what a test push came to on each device."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient


class RenewOut(Lenient):
    """A renewed subscription: the device it belongs to, pushed at the new endpoint."""

    device_id: str


class VapidKeyOut(Lenient):
    """The gateway's VAPID public key: base64url of the uncompressed P-256 point,
    what a page passes as `applicationServerKey` to `PushManager.subscribe()`."""

    key: str


class SubscriptionOut(Lenient):
    """A subscription just stored, and the device it belongs to."""

    id: str
    device_id: str


class PushTestResult(Lenient):
    """One device's test push: the push service's status code (None: no answer, or
    refused before sending), what happened, and how long the push service took."""

    device_id: str
    device_name: str
    status_code: int | None = None
    detail: str
    latency_ms: float | None = None


class PushTestOut(Lenient):
    items: list[PushTestResult]


class PushStatsOut(Lenient):
    """What this gateway process's sender has done since it started, by outcome:
    sent, gone (404/410), failed, retried, refused, errors, pass_errors."""

    counts: dict[str, int]
