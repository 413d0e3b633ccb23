"""What goes on the wire to a push service (docs/remote.md, "Push"): the payload
encrypted for one browser (RFC 8291 aes128gcm, the `http-ece` library), the VAPID
Authorization (RFC 8292, the `py-vapid` library), and the RFC 8030 headers."""

from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import http_ece
import httpx
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02

from mailui4agents.domain.json_types import JsonObject
from mailui4agents.services.push_keys import VapidKey, b64url, b64url_decode

URGENT = frozenset({"permission_request", "reminder", "escalation", "test", "waiting"})
TTL_S = 12 * 3600  # how long a push service keeps an undelivered push
JWT_TTL_S = 12 * 3600  # RFC 8292: at most 24 h
MAX_RETRY_AFTER_S = 3600.0
BODY_CAP = 4096  # bytes of a push service's answer read (the rest is dropped)
DETAIL_CHARS = 200


def encrypt(plaintext: bytes, p256dh: str, auth: str) -> bytes:
    """RFC 8291 aes128gcm with a fresh ephemeral key and salt per message."""
    body: bytes = http_ece.encrypt(
        plaintext,
        salt=os.urandom(16),
        private_key=ec.generate_private_key(ec.SECP256R1()),
        dh=b64url_decode(p256dh),
        auth_secret=b64url_decode(auth),
        version="aes128gcm",
    )
    return body


def origin_of(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{parts.scheme}://{host}{port}"


def vapid_authorization(key: VapidKey, endpoint: str, subject: str) -> str:
    """RFC 8292: `vapid t=<ES256 JWT for the endpoint's origin>, k=<public key>`."""
    claims = {"aud": origin_of(endpoint), "exp": int(time.time()) + JWT_TTL_S, "sub": subject}
    header: str = Vapid02(key.private).sign(claims)["Authorization"]
    return header


def topic_of(payload: JsonObject) -> str | None:
    """RFC 8030 Topic (≤ 32 base64url characters) from the payload's `tag`: a later
    push with the same tag replaces an undelivered earlier one at the push service."""
    tag = payload.get("tag")
    if not isinstance(tag, str) or not tag:
        return None
    return b64url(hashlib.sha256(tag.encode()).digest())[:32]


def push_headers(
    key: VapidKey, endpoint: str, subject: str, kind: str, payload: JsonObject
) -> dict[str, str]:
    headers = {
        "Authorization": vapid_authorization(key, endpoint, subject),
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
        "TTL": str(TTL_S),
        "Urgency": "high" if kind in URGENT else "normal",
    }
    topic = topic_of(payload)
    if topic is not None:
        headers["Topic"] = topic
    return headers


# --- the answer ---------------------------------------------------------------


@dataclass
class Answer:
    """What one POST came to: the push service's status (None: no answer),
    what to say about it, and how long it took."""

    status: int | None
    detail: str
    latency_us: int
    retry_after: float | None = None


def retry_after_s(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: the backoff decides
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


async def read_capped(response: httpx.Response) -> str:
    """The first BODY_CAP bytes of an answer, as text (push services answer in a few
    bytes; a huge answer is not read whole)."""
    got = bytearray()
    async for chunk in response.aiter_raw():
        got += chunk
        if len(got) >= BODY_CAP:
            break
    return bytes(got[:BODY_CAP]).decode("utf-8", "replace").strip()[:DETAIL_CHARS]


def since_us(started: float) -> int:
    return int((time.perf_counter() - started) * 1_000_000)
