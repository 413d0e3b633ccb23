"""A push service of our own (RFC 8030) on 127.0.0.1: what the gateway POSTs pushes to
in tests, in place of FCM, Mozilla's autopush or Apple's web push service.

A real HTTP server (Starlette under uvicorn, port 0, in a thread). For each POST
to `/push/{name}` it checks what a real push service checks and what a browser
then does:

- VAPID (RFC 8292): `Authorization: vapid t=JWT, k=KEY`; the JWT is ES256, signed
  by the private half of `k`, its `aud` the endpoint's origin, its `exp` in the
  future and at most 24 h away, a `sub` present. Anything else: 401 (and kept in
  `rejected`, with why).
- `Content-Encoding: aes128gcm` and a `TTL`; the body decrypts (RFC 8291) with the
  subscription's key pair, made here the way a browser makes it
  (`make_subscription`): else 400.

What was accepted is kept (`messages`: the decrypted JSON, the headers, when);
`wait(n, deadline)` / `await wait_async(...)` wait for it without sleeping. Each
endpoint answers 201 unless told otherwise (`answer(name, 410, ...)`): a queue of
answers, the last one repeating.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.live_app import uvicorn_thread


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscription:
    """What a browser's PushManager.subscribe() gives a page, plus its private key."""

    name: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes

    @property
    def p256dh(self) -> str:
        return b64url(
            self.private_key.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
        )

    @property
    def auth(self) -> str:
        return b64url(self.auth_secret)

    def to_json(self) -> dict[str, Any]:
        """PushSubscription.toJSON()."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


@dataclass
class Message:
    name: str
    payload: dict[str, Any]
    headers: dict[str, str]
    claims: dict[str, Any]
    vapid_key: str
    received_at: float  # time.time()
    received_mono: float  # time.monotonic()


@dataclass
class Answer:
    status: int
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0  # answer only after this long (a push service that stalls)


class PushService:
    """The state behind the HTTP server; thread-safe (the server runs in its own thread)."""

    def __init__(self) -> None:
        self.url = ""
        self.subscriptions: dict[str, Subscription] = {}
        self.messages: list[Message] = []
        self.rejected: list[tuple[str, int, str]] = []  # (name, status, why)
        self.posts: list[tuple[str, int]] = []  # every POST: (name, status answered)
        self.arrived: list[str] = []  # every POST's endpoint name, as it arrives
        self._answers: dict[str, list[Answer]] = {}
        self._cond = threading.Condition()

    # set-up --------------------------------------------------------------------------

    def make_subscription(self, name: str | None = None) -> Subscription:
        """A subscription as a browser makes one: a P-256 key pair and 16 random
        bytes of auth secret, for the endpoint `{url}/push/{name}`."""
        name = name or os.urandom(6).hex()
        sub = Subscription(
            name=name,
            endpoint=f"{self.url}/push/{name}",
            private_key=ec.generate_private_key(ec.SECP256R1()),
            auth_secret=os.urandom(16),
        )
        with self._cond:
            self.subscriptions[name] = sub
        return sub

    def answer(
        self,
        name: str,
        status: int,
        body: str = "",
        headers: dict[str, str] | None = None,
        hang_s: float = 0.0,
    ) -> None:
        """Queue an answer for the endpoint; the last queued one repeats."""
        with self._cond:
            self._answers.setdefault(name, []).append(Answer(status, body, headers or {}, hang_s))

    def answers(self, name: str, *statuses: int | Answer) -> None:
        for st in statuses:
            if isinstance(st, Answer):
                self.answer(name, st.status, st.body, st.headers)
            else:
                self.answer(name, st)

    # waiting -------------------------------------------------------------------------

    def received(self, name: str | None = None) -> list[Message]:
        with self._cond:
            return [m for m in self.messages if name is None or m.name == name]

    def wait(self, n: int = 1, name: str | None = None, timeout: float = 10.0) -> list[Message]:
        """Block until `n` messages (for `name`, or any) were accepted; AssertionError
        at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [m for m in self.messages if name is None or m.name == name]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"push service: {len(got)} of {n} messages for {name or 'anyone'} "
                        f"within {timeout} s; posts {self.posts}, rejected {self.rejected}"
                    )
                self._cond.wait(left)

    def wait_posts(self, n: int, name: str, timeout: float = 10.0) -> list[int]:
        """Block until `n` POSTs reached `name` (whatever was answered)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [st for nm, st in self.posts if nm == name]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(got)} of {n} posts to {name}: {self.posts}")
                self._cond.wait(left)

    async def wait_async(
        self, n: int = 1, name: str | None = None, within_s: float = 10.0
    ) -> list[Message]:
        """`wait` from async code whose loop must keep running (an in-process gateway)."""
        return await anyio.to_thread.run_sync(lambda: self.wait(n, name, within_s))

    async def wait_posts_async(self, n: int, name: str, within_s: float = 10.0) -> list[int]:
        return await anyio.to_thread.run_sync(lambda: self.wait_posts(n, name, within_s))

    # the push service ---------------------------------------------------------------

    def _next_answer(self, name: str) -> Answer:
        queue = self._answers.get(name)
        if not queue:
            return Answer(201)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def _reject(self, name: str, status: int, why: str) -> Response:
        with self._cond:
            self.rejected.append((name, status, why))
            self.posts.append((name, status))
            self._cond.notify_all()
        return Response(why, status_code=status)

    def wait_arrived(self, name: str, within_s: float = 10.0) -> None:
        """Block until a POST to `name` has arrived (before it is answered)."""
        deadline = time.monotonic() + within_s
        with self._cond:
            while name not in self.arrived:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no POST to {name} arrived: {self.arrived}")
                self._cond.wait(left)

    async def handle(self, request: Request) -> Response:
        name = request.path_params["name"]
        with self._cond:
            self.arrived.append(name)
            self._cond.notify_all()
        body = await request.body()
        sub = self.subscriptions.get(name)
        if sub is None:
            return self._reject(name, 404, "no such subscription")
        try:
            claims, key = verify_vapid(request.headers.get("authorization", ""), self.url)
        except ValueError as exc:
            return self._reject(name, 401, f"VAPID: {exc}")
        if request.headers.get("content-encoding") != "aes128gcm":
            return self._reject(name, 400, "Content-Encoding must be aes128gcm")
        if not request.headers.get("ttl", "").isdigit():
            return self._reject(name, 400, "TTL header missing")
        try:
            plain = http_ece.decrypt(
                body, private_key=sub.private_key, auth_secret=sub.auth_secret, version="aes128gcm"
            )
            payload = json.loads(plain)
        except Exception as exc:
            return self._reject(name, 400, f"cannot decrypt: {exc!r}")
        with self._cond:
            answer = self._next_answer(name)
        if answer.hang_s:
            await anyio.sleep(answer.hang_s)  # the stall being simulated, not a wait
        with self._cond:
            self.posts.append((name, answer.status))
            if 200 <= answer.status < 300:
                self.messages.append(
                    Message(
                        name=name,
                        payload=payload,
                        headers=dict(request.headers),
                        claims=claims,
                        vapid_key=key,
                        received_at=time.time(),
                        received_mono=time.monotonic(),
                    )
                )
            self._cond.notify_all()
        headers = dict(answer.headers)
        if 200 <= answer.status < 300:
            headers.setdefault("Location", f"{self.url}/message/{os.urandom(8).hex()}")
        return Response(answer.body, status_code=answer.status, headers=headers)


def verify_vapid(header: str, origin: str) -> tuple[dict[str, Any], str]:
    """RFC 8292 §2-3: the claims and the public key of a valid `vapid` header;
    ValueError saying what is wrong otherwise."""
    scheme, _, rest = header.partition(" ")
    if scheme.lower() != "vapid":
        raise ValueError(f"scheme {scheme!r}, not vapid")
    params: dict[str, str] = {}
    for part in rest.split(","):
        k, _, v = part.strip().partition("=")
        params[k.strip()] = v.strip()
    if "t" not in params or "k" not in params:
        raise ValueError("t= and k= are both required")
    try:
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(params["k"]))
    except Exception as exc:
        raise ValueError(f"k is not a P-256 point: {exc}") from exc
    try:
        claims: dict[str, Any] = jwt.decode(
            params["t"],
            public,
            algorithms=["ES256"],
            audience=origin,
            options={"require": ["exp", "aud", "sub"]},
        )
    except jwt.PyJWTError as exc:
        raise ValueError(f"JWT refused: {exc}") from exc
    if claims["exp"] > time.time() + 86400 + 60:
        raise ValueError("exp more than 24 h ahead")
    if not str(claims["sub"]).startswith(("mailto:", "https://")):
        raise ValueError("sub must be a mailto: or https: URL")
    return claims, params["k"]


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@contextmanager
def push_service() -> Iterator[PushService]:
    """A running push service; `service.url` is its origin (http://127.0.0.1:PORT)."""
    service = PushService()
    app = Starlette(routes=[Route("/push/{name}", service.handle, methods=["POST"])])
    with uvicorn_thread(app, lifespan="off") as url:
        service.url = url
        yield service
