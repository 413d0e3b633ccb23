"""A request's delivery log on the wire (GET /api/v1/permissions/{id}/deliveries,
docs/remote.md, "Tracking a request")."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient, Timestamp


class DeliveryOut(Lenient):
    """One thing that happened to a request on one channel (and device):
    `state` queued, sent, failed, shown, opened, decided or withdrawn; `detail`
    the push service's answer or how it was settled; `latency_ms` how long the
    push service took to answer."""

    channel: str
    person: str | None = None
    device: str | None = None
    state: str
    detail: str | None = None
    at: Timestamp
    latency_ms: float | None = None


class ReceiptOut(Lenient):
    """A notification's receipt: `recorded` false when that state was recorded before."""

    state: str
    recorded: bool
