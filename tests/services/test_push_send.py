"""Sending Web Push to a real HTTP push service of ours (tests/fakes/push_service.py)
from a gateway in this process (docs/remote.md, "Push"): the push arrives encrypted
for the browser's key with a valid VAPID JWT; 404/410 remove the subscription and
tell its owner; other 4xx fail at once with the answer; 429/5xx are retried with
backoff; a rolled-back transaction pushes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpcore
import httpx
import pytest
from sqlalchemy import select, update

from mailui4agents.db.engine import Database
from mailui4agents.db.reach_tables import (
    DeviceRow,
    PushOutboxRow,
    PushSubscriptionRow,
    RequestDeliveryRow,
)
from mailui4agents.db.tables import UserRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import push_endpoints, push_send, push_wire
from mailui4agents.services.identity import hash_token, new_secret
from mailui4agents.services.push_keys import VapidKey
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, make_settings, started_app
from tests.fakes.push_service import PushService, Subscription, push_service

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def fake() -> Iterator[PushService]:
    with push_service() as service:
        yield service


@pytest.fixture
def settings(
    tmp_path: Path, db_backend: str, request: pytest.FixtureRequest, fake: PushService
) -> Settings:
    return make_settings(
        request,
        tmp_path,
        db_backend,
        push_endpoint_allow=(f"{fake.url}/push/",),
        push_retry_base_s=0.05,
        push_poll_s=60.0,  # only the commit's wake-up (or a retry falling due) sends
    )


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def device_with_subscription(
    gw: Gateway, username: str, name: str, sub: Subscription
) -> tuple[str, str]:
    """A device of `username` (as pairing makes one) subscribed to `sub`: (device, subscription)."""
    async with gw.write() as s:
        user = await s.scalar(select(UserRow).where(UserRow.username == username))
        assert user is not None
        token = UserTokenRow(user_id=user.id, name=name, token_hash=hash_token(new_secret("x")))
        s.add(token)
        await s.flush()
        device = DeviceRow(user_id=user.id, name=name, token_id=token.id)
        s.add(device)
        await s.flush()
        row = PushSubscriptionRow(
            device_id=device.id, endpoint=sub.endpoint, p256dh=sub.p256dh, auth=sub.auth
        )
        s.add(row)
        await s.flush()
        return device.id, row.id


async def a_request(api: Api) -> str:
    """A pending permission request of agent-a in a session ana started."""
    if "ana" not in api.tokens:
        await api.user("ana")
        await api.agent("agent-a", owners=["ana"])
    r = await api.send("ana", ["agent-a@/srv/shop.new"], subject="deploy")
    assert r.status_code == 201, r.text
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": r.json()["session_id"],
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": "make deploy"},
            "relay_key": f"k-{time.monotonic_ns()}",
        },
        headers=api.auth("agent-a"),
    )
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


async def enqueue(gw: Gateway, sub_id: str, device_id: str, rid: str | None, **payload: Any) -> str:
    async with gw.write() as s:
        return await push_send.enqueue(
            s,
            subscription_id=sub_id,
            request_id=rid,
            kind="permission_request" if rid else "test",
            payload={"type": "permission_request", "title": "t", "tag": "tag-1", **payload},
            person="ana",
            device_id=device_id,
            device_name="Ana's phone",
        )


async def deliveries(gw: Gateway, request_id: str) -> list[RequestDeliveryRow]:
    async with gw.read() as s:
        rows = await s.scalars(
            select(RequestDeliveryRow)
            .where(RequestDeliveryRow.request_id == request_id)
            .order_by(RequestDeliveryRow.id)
        )
        return list(rows)


async def outbox(gw: Gateway, outbox_id: str) -> PushOutboxRow | None:
    async with gw.read() as s:
        row: PushOutboxRow | None = await s.get(PushOutboxRow, outbox_id)
        return row


async def final(gw: Gateway, outbox_id: str, within_s: float = 10.0) -> push_send.Result:
    assert gw.push is not None
    got = await gw.push.wait_final([outbox_id], within_s)
    return got[outbox_id]


# --- the fake push service itself: it refuses what a real one refuses ----------------


def _post(fake: PushService, sub: Subscription, authorization: str) -> httpx.Response:
    body = push_wire.encrypt(b'{"x":1}', sub.p256dh, sub.auth)
    return httpx.post(
        sub.endpoint,
        content=body,
        headers={"Authorization": authorization, "Content-Encoding": "aes128gcm", "TTL": "60"},
    )


def test_the_fake_push_service_accepts_a_valid_push_and_refuses_bad_vapid(
    fake: PushService,
) -> None:
    sub = fake.make_subscription()
    key = VapidKey.generate()
    good = push_wire.vapid_authorization(key, sub.endpoint, "mailto:ops@example.org")
    assert _post(fake, sub, good).status_code == 201
    assert fake.wait(1, sub.name)[0].payload == {"x": 1}

    # Negative control 1: signed by another key than the k= it names.
    other = VapidKey.generate()
    forged_t = push_wire.vapid_authorization(other, sub.endpoint, "mailto:x@example.org")
    t = forged_t.split("t=", 1)[1].split(",", 1)[0]
    forged = f"vapid t={t},k={key.public_b64}"
    r = _post(fake, sub, forged)
    assert r.status_code == 401 and "Signature" in r.text, r.text

    # Negative control 2: a JWT for another origin.
    wrong_aud = push_wire.vapid_authorization(key, "https://push.example.net/x", "mailto:a@b.c")
    r = _post(fake, sub, wrong_aud)
    assert r.status_code == 401 and "audience" in r.text.lower(), r.text

    # Negative control 3: encrypted for another browser's key.
    stranger = fake.make_subscription()
    body = push_wire.encrypt(b"{}", stranger.p256dh, stranger.auth)
    r = httpx.post(
        sub.endpoint,
        content=body,
        headers={"Authorization": good, "Content-Encoding": "aes128gcm", "TTL": "60"},
    )
    assert r.status_code == 400 and "decrypt" in r.text, r.text
    assert len(fake.received(sub.name)) == 1


# --- the gateway's sender ---------------------------------------------------------------


async def test_a_queued_push_arrives_decrypted_with_a_valid_vapid_jwt(
    api: Api, fake: PushService
) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    started = time.monotonic()
    oid = await enqueue(gw, sub_id, device_id, rid, request_id=rid, body="make deploy")
    [msg] = await fake.wait_async(1, sub.name)
    assert msg.payload == {
        "type": "permission_request",
        "title": "t",
        "tag": "tag-1",
        "request_id": rid,
        "body": "make deploy",
    }
    assert msg.received_mono - started < 5  # woken by the commit, not the 60 s poll
    assert gw.push is not None
    assert msg.vapid_key == gw.push.key.public_b64
    assert msg.claims["sub"] == "mailto:agentmail@localhost"
    assert msg.claims["aud"] == fake.url
    assert msg.headers["urgency"] == "high"
    assert msg.headers["ttl"] == str(push_wire.TTL_S)
    assert msg.headers["topic"] == push_wire.topic_of({"tag": "tag-1"})
    assert len(msg.headers["topic"]) <= 32

    result = await final(gw, oid)
    assert result.status_code == 201 and result.detail == "201"
    states = [(d.state, d.detail, d.device_name) for d in await deliveries(gw, rid)]
    assert states == [("queued", None, "Ana's phone"), ("sent", "201", "Ana's phone")]
    sent = (await deliveries(gw, rid))[-1]
    assert sent.latency_us is not None and sent.latency_us > 0
    async with gw.read() as s:
        subscription = await s.get(PushSubscriptionRow, sub_id)
        assert subscription is not None and subscription.last_ok_at is not None
    assert gw.push.counts["sent"] >= 1


async def test_nothing_is_sent_for_a_transaction_that_rolled_back(
    api: Api, fake: PushService
) -> None:
    gw = gateway_of(api)
    await api.user("ana")
    sub = fake.make_subscription()
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with gw.write() as s:
            await push_send.enqueue(
                s,
                subscription_id=sub_id,
                request_id=None,
                kind="test",
                payload={"n": "rolled back"},
                person="ana",
                device_id=device_id,
                device_name="Ana's phone",
            )
            raise Boom
    # A push committed after it is sent; the rolled-back one never was.
    oid = await enqueue(gw, sub_id, device_id, None, n="committed")
    assert (await final(gw, oid)).status_code == 201
    assert [m.payload["n"] for m in fake.received(sub.name)] == ["committed"]
    async with gw.read() as s:
        rows = (await s.scalars(select(PushOutboxRow))).all()
    assert [r.payload["n"] for r in rows] == ["committed"]


async def test_410_removes_the_subscription_records_it_and_tells_the_owner(
    api: Api, fake: PushService
) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    fake.answer(sub.name, 410, "push subscription has unsubscribed or expired.")
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid)
    assert result.status_code == 410 and result.detail == "410 gone: subscription removed"
    [_queued, failed] = await deliveries(gw, rid)
    assert (failed.state, failed.detail) == ("failed", "410 gone: subscription removed")
    async with gw.read() as s:
        assert await s.get(PushSubscriptionRow, sub_id) is None
        device = await s.get(DeviceRow, device_id)
        assert device is not None and device.push_notice is not None
        assert "410" in device.push_notice and "Ana's phone" in device.push_notice
    listed = await api.http.get("/api/v1/devices", headers=api.auth("ana"))
    [shown] = [d for d in listed.json()["items"] if d["id"] == device_id]
    assert shown["push"] is False and "410" in shown["push_notice"]
    # ... and the devices page says it, to ana only.
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as web:
        await web.get("/login")
        form = {"username": "ana", "password": USER_PASSWORD, "next": "/devices"}
        form["csrf"] = web.cookies["am_login_csrf"]
        assert (await web.post("/login", data=form)).status_code == 303
        page = await web.get("/devices")
        assert "Push notifications to Ana&#39;s phone stopped" in page.text, page.text
    assert gw.push is not None and gw.push.counts["gone"] >= 1


async def test_413_fails_at_once_with_the_push_services_answer(api: Api, fake: PushService) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    fake.answer(sub.name, 413, "Payload Too Large " + "x" * 500)
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid)
    assert result.status_code == 413
    assert result.detail.startswith("push to Ana's phone failed: 413 Payload Too Large x")
    assert len(result.detail) < 260  # the answer cut at 200 characters
    row = await outbox(gw, oid)
    assert row is not None and (row.state, row.attempts) == ("failed", 1)
    assert [d.state for d in await deliveries(gw, rid)] == ["queued", "failed"]
    assert fake.wait_posts(1, sub.name) == [413]
    assert gw.push is not None and gw.push.counts["failed"] >= 1


async def test_429_and_500_are_retried_then_sent(api: Api, fake: PushService) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    fake.answers(sub.name, 429, 500, 201)
    fake.answer(sub.name, 201)
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid)
    assert result.status_code == 201, result
    assert await fake.wait_posts_async(3, sub.name) == [429, 500, 201]
    row = await outbox(gw, oid)
    assert row is not None and (row.state, row.attempts) == ("sent", 3)
    assert [d.state for d in await deliveries(gw, rid)] == ["queued", "sent"]
    assert gw.push is not None and gw.push.counts["retried"] >= 2


async def test_retry_after_is_honoured(api: Api, fake: PushService) -> None:
    gw = gateway_of(api)
    await api.user("ana")
    sub = fake.make_subscription()
    fake.answer(sub.name, 429, "slow down", {"Retry-After": "1"})
    fake.answer(sub.name, 201)
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, None)
    assert (await final(gw, oid)).status_code == 201
    [msg] = fake.received(sub.name)
    first_post = await outbox(gw, oid)
    assert first_post is not None
    # The retry came at least a second after the 429 (the backoff alone is 0.05 s).
    assert msg.received_at - first_post.created_at.timestamp() >= 1.0


async def test_500_forever_fails_after_the_last_attempt(api: Api, fake: PushService) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    fake.answer(sub.name, 500, "internal error")
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid, within_s=20)
    assert result.detail == (
        f"push to Ana's phone failed after {push_send.MAX_ATTEMPTS} attempts: 500 internal error"
    ), result
    assert fake.wait_posts(push_send.MAX_ATTEMPTS, sub.name) == [500] * push_send.MAX_ATTEMPTS
    assert [d.state for d in await deliveries(gw, rid)] == ["queued", "failed"]


async def test_a_private_endpoint_is_refused_at_send_time(api: Api, fake: PushService) -> None:
    """A subscription whose endpoint is no longer allowed (here: written straight to
    the database, as if its DNS changed) is refused, not posted to."""
    gw = gateway_of(api)
    rid = await a_request(api)
    sub = fake.make_subscription()
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    async with gw.write() as s:
        await s.execute(
            update(PushSubscriptionRow)
            .where(PushSubscriptionRow.id == sub_id)
            .values(endpoint=sub.endpoint.replace("http://", "https://").replace("/push/", "/p/"))
        )
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid)
    assert result.status_code is None
    assert result.detail.startswith("endpoint refused:") and "loopback" in result.detail
    assert fake.posts == [p for p in fake.posts if p[0] != sub.name]  # never reached


async def test_enqueue_refuses_a_payload_over_3000_bytes_and_unknown_kinds(api: Api) -> None:
    gw = gateway_of(api)
    async with gw.write() as s:
        with pytest.raises(ValueError, match="3000"):
            await push_send.enqueue(
                s,
                subscription_id="x",
                request_id=None,
                kind="test",
                payload={"body": "é" * 1500},
                person=None,
                device_id="d",
                device_name="n",
            )
        with pytest.raises(ValueError, match="kind"):
            await push_send.enqueue(
                s,
                subscription_id="x",
                request_id=None,
                kind="spam",
                payload={},
                person=None,
                device_id="d",
                device_name="n",
            )


async def test_old_sent_and_failed_rows_are_swept(api: Api, fake: PushService) -> None:
    gw = gateway_of(api)
    await api.user("ana")
    sub = fake.make_subscription()
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, None)
    assert (await final(gw, oid)).status_code == 201
    queued = await enqueue(gw, sub_id, device_id, None)
    async with gw.write() as s:
        old = utcnow() - timedelta(days=2)
        await s.execute(update(PushOutboxRow).values(created_at=old))
        await s.execute(
            update(PushOutboxRow).where(PushOutboxRow.id == queued).values(state="queued")
        )
        swept = await push_send.sweep(s, utcnow())
    assert swept >= 1
    assert await outbox(gw, oid) is None


def test_the_payload_is_encrypted_afresh_each_time(fake: PushService) -> None:
    sub = fake.make_subscription()
    one = push_wire.encrypt(b"secret", sub.p256dh, sub.auth)
    two = push_wire.encrypt(b"secret", sub.p256dh, sub.auth)
    assert b"secret" not in one and one != two  # a fresh salt and key per message


async def test_a_redirect_is_not_followed_and_a_huge_answer_is_not_read_whole(
    api: Api, fake: PushService
) -> None:
    gw = gateway_of(api)
    rid = await a_request(api)
    target = fake.make_subscription()
    sub = fake.make_subscription()
    fake.answer(sub.name, 307, "see there " + "y" * 1_000_000, {"Location": target.endpoint})
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, rid)
    result = await final(gw, oid)
    assert result.status_code == 307
    assert result.detail.startswith("push to Ana's phone failed: 307 see there yyy")
    assert len(result.detail) < 260
    assert fake.posts.count((target.name, 201)) == 0  # the redirect was not followed


async def test_the_guarded_connection_refuses_private_addresses_and_connects_to_the_checked_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At send the check is made by the connection: a name resolving to loopback is
    refused, and a public name is connected to by the address that was checked
    (the DNS is asked once: an answer changing between check and connect cannot
    redirect the socket)."""
    async with httpx.AsyncClient(transport=push_endpoints.guarded_transport()) as c:
        for url in ("https://localhost:9/x", "https://127.0.0.1:9/x", "https://[::1]:9/x"):
            with pytest.raises(httpx.ConnectError, match="refused"):
                await c.post(url)

    answers = iter([[("8.8.8.8", 443)], [("127.0.0.1", 443)]])  # a rebinding DNS
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **kw: Any) -> list[Any]:
        asked.append(host)
        return [(2, 1, 6, "", addr) for addr in next(answers)]

    connected: list[str] = []

    async def connect_tcp(self: Any, host: str, port: int, *a: Any, **kw: Any) -> Any:
        connected.append(host)
        raise httpcore.ConnectError("stop here")

    monkeypatch.setattr(anyio, "getaddrinfo", getaddrinfo)  # as push_endpoints calls it
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
    async with httpx.AsyncClient(transport=push_endpoints.guarded_transport()) as c:
        with pytest.raises(httpx.ConnectError, match="stop here"):
            await c.post("https://push.example.org/x")
    assert asked == ["push.example.org"] and connected == ["8.8.8.8"]


async def test_stopping_the_gateway_cuts_a_stalled_post_short_and_requeues_it(
    settings: Settings, fake: PushService
) -> None:
    """Shutdown does not wait out a push service that does not answer (10 s), nor
    cancel database work midway: the push goes back to the queue for next time."""
    sub = fake.make_subscription()
    fake.answer(sub.name, 201, hang_s=30)
    async with started_app(settings) as app:
        gw: Gateway = app.state.gateway
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gw"
        ) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            await api.user("ana")
        device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
        oid = await enqueue(gw, sub_id, device_id, None)
        await anyio.to_thread.run_sync(fake.wait_arrived, sub.name)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5
    db = Database(settings.resolved_database_url())  # no gateway: nobody sends it again
    try:
        async with db.read() as s:
            row = await s.get(PushOutboxRow, oid)
    finally:
        await db.dispose()
    assert row is not None and row.state == "queued", row and (row.state, row.detail)
    assert row.detail is not None and "stopped" in row.detail


def test_the_senders_share_one_tls_context_that_verifies() -> None:
    """One CA bundle load per process (push_endpoints.tls_context), not one per
    client and transport on every gateway start; and it still checks certificates."""
    import ssl

    from mailui4agents.services.push_endpoints import guarded_transport, tls_context

    ctx = tls_context()
    assert ctx is tls_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname is True
    assert ctx.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded
    pool = guarded_transport()._pool
    assert pool._ssl_context is ctx


async def test_410_on_a_push_of_no_request_removes_the_subscription_too(
    api: Api, fake: PushService
) -> None:
    """A push that belongs to no request ("waiting for you", a test push) has no
    delivery log; a 410 still removes the subscription and tells the owner."""
    gw = gateway_of(api)
    await api.user("ana")
    sub = fake.make_subscription()
    fake.answer(sub.name, 410, "gone")
    device_id, sub_id = await device_with_subscription(gw, "ana", "Ana's phone", sub)
    oid = await enqueue(gw, sub_id, device_id, None, n="waiting")
    result = await final(gw, oid)
    assert result.status_code == 410 and result.detail == "410 gone: subscription removed"
    async with gw.read() as s:
        assert await s.get(PushSubscriptionRow, sub_id) is None
        device = await s.get(DeviceRow, device_id)
        assert device is not None and device.push_notice is not None
    assert gw.push is not None and gw.push.counts["gone"] >= 1
