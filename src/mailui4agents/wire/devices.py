"""Device shapes (docs/api.md, "Devices"): a phone or browser paired by QR, and
the pairing that makes one."""

from __future__ import annotations

from mailui4agents.wire.models import Lenient, Timestamp


class PairingOut(Lenient):
    """A pairing just made: `url` (`{gateway}/pair/{code}`) logs one browser in
    as the device, once, before `code_expires_at`. The code is shown only here."""

    url: str
    code_expires_at: Timestamp
    name: str
    user: str


class DeviceOut(Lenient):
    """One of the caller's devices: a named web session. `push`: whether it has a
    push subscription; `push_notice`: why push to it stopped, if it did (its push
    service said the subscription is gone), until it subscribes again."""

    id: str
    name: str
    created_at: Timestamp
    last_seen_at: Timestamp | None = None
    push: bool = False
    push_notice: str | None = None
