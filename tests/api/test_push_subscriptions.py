"""Push subscriptions over HTTP (docs/remote.md, "Push"): who may subscribe and for
which device, what is refused (each 400 names its field), one subscription per
device, and the endpoint rule: https to public addresses only, or an operator's
`--push-endpoint-allow` prefix — the gateway must not be made to POST into its
own network."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from mailui4agents.db.reach_tables import DeviceRow, PushSubscriptionRow
from mailui4agents.db.tables import UserTokenRow
from mailui4agents.services.push_endpoints import address_refusal
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from mailui4agents.web.auth import csrf_for
from tests.conftest import USER_PASSWORD, Api, make_settings, started_app
from tests.fakes.push_service import PushService, push_service
from tests.web.test_web_devices import pairing, use

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def fake() -> Iterator[PushService]:
    with push_service() as service:
        yield service


@pytest.fixture
def settings(
    tmp_path: Path, db_backend: str, request: pytest.FixtureRequest, fake: PushService
) -> Settings:
    return make_settings(request, tmp_path, db_backend, push_endpoint_allow=(f"{fake.url}/push/",))


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


def body_for(fake: PushService, **extra: Any) -> dict[str, Any]:
    return {**fake.make_subscription().to_json(), **extra}


async def subscribe(
    api: Api, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    return await api.http.post("/api/v1/push/subscriptions", json=body, headers=headers or {})


def error(r: httpx.Response) -> dict[str, Any]:
    e: dict[str, Any] = r.json()["error"]
    return e


@pytest.fixture
async def people(api: Api) -> Api:
    await api.user("ana")
    await api.user("bob")
    await api.agent("agent-a", owners=["ana"])
    return api


async def test_the_vapid_public_key_is_public_and_survives_a_restart(
    api: Api, settings: Settings
) -> None:
    r = await api.http.get("/api/v1/push/vapid-public-key")  # no login
    assert r.status_code == 200
    key = r.json()["key"]
    raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
    assert len(raw) == 65 and raw[0] == 4 and "=" not in key
    # Another gateway on the same data (a restart; a replica on PostgreSQL): the same key.
    async with (
        started_app(settings) as app,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw2") as c,
    ):
        again = await c.get("/api/v1/push/vapid-public-key")
    assert again.json()["key"] == key
    if gateway_of(api).db.is_sqlite:
        mode = (settings.data_dir / "vapid_private.pem").stat().st_mode & 0o777
        assert mode == 0o600


async def test_anonymous_401_agent_403_and_a_token_needs_a_device_name(
    people: Api, fake: PushService
) -> None:
    api = people
    assert (await subscribe(api, body_for(fake, device_name="x"))).status_code == 401
    agent = await subscribe(api, body_for(fake, device_name="x"), api.auth("agent-a"))
    assert agent.status_code == 403
    nameless = await subscribe(api, body_for(fake), api.auth("ana"))
    assert nameless.status_code == 400 and error(nameless)["field"] == "device_name"

    made = await subscribe(api, body_for(fake, device_name="Ana's laptop"), api.auth("ana"))
    assert made.status_code == 201, made.text
    out = made.json()
    assert set(out) == {"id", "device_id"}
    listed = await api.http.get("/api/v1/devices", headers=api.auth("ana"))
    [device] = listed.json()["items"]
    assert (device["id"], device["name"], device["push"]) == (
        out["device_id"],
        "Ana's laptop",
        True,
    )
    # The device's token is its own, not ana's API token: revoking the device
    # leaves her logged in.
    async with gateway_of(api).read() as s:
        row = await s.get(DeviceRow, out["device_id"])
        assert row is not None
        token = await s.get(UserTokenRow, row.token_id)
        assert token is not None and token.name == "Ana's laptop"
    revoked = await api.http.delete(f"/api/v1/devices/{out['device_id']}", headers=api.auth("ana"))
    assert revoked.status_code == 200
    assert (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).status_code == 200
    async with gateway_of(api).read() as s:
        assert await s.get(PushSubscriptionRow, out["id"]) is None  # died with its device
    # bob sees none of it.
    assert (await api.http.get("/api/v1/devices", headers=api.auth("bob"))).json()["items"] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"endpoint": "http://push.example.com/x"}, "endpoint"),
        ({"endpoint": "https://push.example.com/" + "x" * 2000}, "endpoint"),
        ({"endpoint": "not a url"}, "endpoint"),
        ({"endpoint": "https://user:pw@push.example.com/x"}, "endpoint"),
        ({"keys": {"p256dh": "!!!", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"p256dh": "BAAA", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"p256dh": "B" + "A" * 86, "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": {"auth": "AAAAAAAAAAAAAAAAAAAAAA"}}, "keys.p256dh"),
        ({"keys": "x"}, "keys"),
        ({"device_name": ""}, "device_name"),
        ({"device_name": "a\x00b"}, "device_name"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_bad_subscriptions_are_400_naming_the_field(
    people: Api, fake: PushService, change: dict[str, Any], field: str
) -> None:
    body = {**body_for(fake, device_name="Ana's laptop"), **change}
    r = await subscribe(people, body, people.auth("ana"))
    assert r.status_code == 400, r.text
    assert error(r)["field"] == field, r.text


async def test_auth_of_the_wrong_length_is_refused(people: Api, fake: PushService) -> None:
    body = body_for(fake, device_name="Ana's laptop")
    body["keys"]["auth"] = base64.urlsafe_b64encode(b"x" * 15).decode().rstrip("=")
    r = await subscribe(people, body, people.auth("ana"))
    assert r.status_code == 400 and error(r)["field"] == "keys.auth", r.text
    assert "16 bytes" in error(r)["message"]


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://127.0.0.1/push/x",
        "https://127.1.2.3:8443/push/x",
        "https://10.1.2.3/push/x",
        "https://172.16.0.1/push/x",
        "https://192.168.1.20/push/x",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/push/x",
        "https://0.0.0.0/push/x",
        "https://224.0.0.1/push/x",
        "https://240.0.0.1/push/x",
        "https://[::1]/push/x",
        "https://[fd00::1]/push/x",
        "https://[fe80::1]/push/x",
        "https://[::ffff:10.0.0.1]/push/x",
        "https://[::ffff:127.0.0.1]/push/x",
        "https://[64:ff9b::a00:1]/push/x",
        "https://localhost/push/x",  # a name that resolves to loopback
        "https://localhost./push/x",
    ],
)
async def test_endpoints_into_the_private_network_are_refused(
    people: Api, fake: PushService, endpoint: str
) -> None:
    body = {**body_for(fake, device_name="Ana's laptop"), "endpoint": endpoint}
    r = await subscribe(people, body, people.auth("ana"))
    assert r.status_code == 400, r.text
    assert error(r)["field"] == "endpoint"
    async with gateway_of(people).read() as s:
        assert await s.scalar(select(func.count()).select_from(PushSubscriptionRow)) == 0


async def test_a_public_address_and_the_allowed_prefix_are_accepted_nothing_else(
    people: Api, fake: PushService
) -> None:
    public = {**body_for(fake, device_name="phone 1"), "endpoint": "https://8.8.8.8/push/abc"}
    assert (await subscribe(people, public, people.auth("ana"))).status_code == 201
    allowed = body_for(fake, device_name="phone 2")  # http://127.0.0.1:PORT/push/…
    assert allowed["endpoint"].startswith(f"{fake.url}/push/")
    assert (await subscribe(people, allowed, people.auth("ana"))).status_code == 201
    # The same server outside the prefix: the default rule, which refuses it.
    beside = {**allowed, "endpoint": f"{fake.url}/other/x", "device_name": "phone 3"}
    r = await subscribe(people, beside, people.auth("ana"))
    assert r.status_code == 400 and error(r)["field"] == "endpoint"
    # A prefix is a prefix of the URL, not of its host: http://127.0.0.1:PORT.evil is not it.
    sneaky = {**allowed, "endpoint": fake.url + "0/push/x", "device_name": "phone 4"}
    assert (await subscribe(people, sneaky, people.auth("ana"))).status_code == 400


def test_address_rule_negative_controls() -> None:
    """Public addresses pass (the rule is not 'refuse everything')."""
    for ok in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "142.250.0.1"):
        assert address_refusal(ok) is None, ok
    for bad in ("127.0.0.1", "10.0.0.1", "::1", "fc00::1", "100.127.255.255", "198.18.0.1"):
        assert address_refusal(bad) is not None, bad


@pytest.fixture
async def phone(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as c:
        yield c


async def test_a_paired_device_subscribes_itself_with_its_cookie_and_csrf_token(
    people: Api, fake: PushService, phone: httpx.AsyncClient
) -> None:
    api = people
    made = await pairing(api, "ana", "Ana's phone")
    assert (await use(phone, made["url"])).status_code == 303
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    cookie = phone.cookies["am_web"]

    body = body_for(fake)  # no device_name: the device is the one logged in
    no_csrf = await phone.post("/api/v1/push/subscriptions", json=body)
    assert no_csrf.status_code == 403
    wrong = await phone.post(
        "/api/v1/push/subscriptions", json=body, headers={"X-CSRF-Token": csrf_for("other")}
    )
    assert wrong.status_code == 403
    headers = {"X-CSRF-Token": csrf_for(cookie)}
    first = await phone.post("/api/v1/push/subscriptions", json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert first.json()["device_id"] == device["id"]

    # Re-subscribing (a new browser key) replaces it: one per device.
    again = await phone.post("/api/v1/push/subscriptions", json=body_for(fake), headers=headers)
    assert again.status_code == 201
    assert again.json()["device_id"] == device["id"] and again.json()["id"] != first.json()["id"]
    async with gateway_of(api).read() as s:
        ids = (await s.scalars(select(PushSubscriptionRow.id))).all()
    assert ids == [again.json()["id"]]
    [listed] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    assert listed["push"] is True

    # bob cannot delete it (404, as for any id that is not his); agents 403; nobody 401.
    sid = again.json()["id"]
    url = f"/api/v1/push/subscriptions/{sid}"
    assert (await api.http.delete(url, headers=api.auth("bob"))).status_code == 404
    assert (await api.http.delete(url, headers=api.auth("agent-a"))).status_code == 403
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as nobody:
        assert (await nobody.delete(url)).status_code == 401
    # The phone itself may (with its CSRF token), once.
    assert (await phone.delete(url)).status_code == 403
    assert (await phone.delete(url, headers=headers)).status_code == 200
    assert (await phone.delete(url, headers=headers)).status_code == 404
    [listed] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    assert listed["push"] is False


async def test_a_password_web_login_becomes_the_named_device(
    people: Api, fake: PushService, phone: httpx.AsyncClient
) -> None:
    api = people
    page = await phone.get("/login")
    csrf = phone.cookies["am_login_csrf"]
    assert page.status_code == 200
    login = await phone.post(
        "/login", data={"username": "ana", "password": USER_PASSWORD, "csrf": csrf, "next": "/"}
    )
    assert login.status_code == 303, login.text
    headers = {"X-CSRF-Token": csrf_for(phone.cookies["am_web"])}
    nameless = await phone.post("/api/v1/push/subscriptions", json=body_for(fake), headers=headers)
    assert nameless.status_code == 400 and error(nameless)["field"] == "device_name"
    made = await phone.post(
        "/api/v1/push/subscriptions",
        json=body_for(fake, device_name="Ana's tablet"),
        headers=headers,
    )
    assert made.status_code == 201, made.text
    # Now the browser is that device: subscribing again needs no name, same device.
    again = await phone.post("/api/v1/push/subscriptions", json=body_for(fake), headers=headers)
    assert again.status_code == 201 and again.json()["device_id"] == made.json()["device_id"]
    # Revoking the device ends that web session too.
    r = await api.http.delete(
        f"/api/v1/devices/{made.json()['device_id']}", headers=api.auth("ana")
    )
    assert r.status_code == 200
    after = await phone.post("/api/v1/push/subscriptions", json=body_for(fake), headers=headers)
    assert after.status_code == 401


async def test_push_test_reports_each_devices_answer(people: Api, fake: PushService) -> None:
    api = people
    none = await api.http.post("/api/v1/push/test", headers=api.auth("bob"))
    assert none.status_code == 200 and none.json() == {"items": []}
    assert (await api.http.post("/api/v1/push/test")).status_code == 401
    assert (
        await api.http.post("/api/v1/push/test", headers=api.auth("agent-a"))
    ).status_code == 403

    good, bad = fake.make_subscription(), fake.make_subscription()
    fake.answer(bad.name, 413, "too big")
    for sub, name in ((good, "Ana's phone"), (bad, "Ana's laptop")):
        r = await subscribe(api, {**sub.to_json(), "device_name": name}, api.auth("ana"))
        assert r.status_code == 201
    r = await api.http.post("/api/v1/push/test", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    items = {i["device_name"]: i for i in r.json()["items"]}
    assert items["Ana's phone"]["status_code"] == 201
    assert items["Ana's phone"]["detail"] == "201"
    assert items["Ana's phone"]["latency_ms"] > 0
    assert items["Ana's laptop"]["status_code"] == 413
    assert items["Ana's laptop"]["detail"] == "push to Ana's laptop failed: 413 too big"
    [msg] = fake.received(good.name)
    assert msg.payload["type"] == "test" and "Ana's phone" in msg.payload["body"]
    stats = await api.http.get("/api/v1/push/stats", headers=api.auth("admin"))
    assert stats.json()["counts"]["sent"] >= 1 and stats.json()["counts"]["failed"] >= 1
    assert (await api.http.get("/api/v1/push/stats", headers=api.auth("ana"))).status_code == 403


def renewal(old: Any, new: Any, **change: Any) -> dict[str, Any]:
    """The worker's POST on `pushsubscriptionchange` (static/sw.js renewSubscription)."""
    o, n = old.to_json(), new.to_json()
    body = {"old_endpoint": o["endpoint"], "old_auth": o["keys"]["auth"], **n}
    body.pop("expirationTime", None)
    return {**body, **change}


async def test_a_renewed_subscription_keeps_the_device_pushed_at_the_new_endpoint(
    people: Api, fake: PushService
) -> None:
    """No login: the old endpoint with its auth secret proves the browser. The row
    is replaced in place (same device); the next push goes to the new endpoint."""
    api = people
    old, new = fake.make_subscription(), fake.make_subscription()
    made = await subscribe(api, {**old.to_json(), "device_name": "Ana's phone"}, api.auth("ana"))
    assert made.status_code == 201
    url = "/api/v1/push/subscriptions/renew"
    r = await api.http.post(url, json=renewal(old, new))
    assert r.status_code == 200, r.text
    assert r.json() == {"device_id": made.json()["device_id"]}
    async with gateway_of(api).read() as s:
        [row] = (await s.scalars(select(PushSubscriptionRow))).all()
    assert (row.id, row.endpoint) == (made.json()["id"], new.to_json()["endpoint"])
    tested = await api.http.post("/api/v1/push/test", headers=api.auth("ana"))
    assert [i["status_code"] for i in tested.json()["items"]] == [201]
    assert fake.received(old.name) == [] and len(fake.received(new.name)) == 1
    # The old pair proves nothing any more.
    again = await api.http.post(url, json=renewal(old, fake.make_subscription()))
    assert again.status_code == 404


async def test_renewal_is_refused_for_a_wrong_secret_a_bad_endpoint_and_a_revoked_device(
    people: Api, fake: PushService
) -> None:
    api = people
    url = "/api/v1/push/subscriptions/renew"
    old, new = fake.make_subscription(), fake.make_subscription()
    made = await subscribe(api, {**old.to_json(), "device_name": "Ana's phone"}, api.auth("ana"))
    assert made.status_code == 201
    # Another browser's secret with this endpoint: 404, and it counts against the address.
    failures = gateway_of(api).logins.address_failures
    before = len(failures._hits.get("127.0.0.1", ()))
    guess = fake.make_subscription().to_json()["keys"]["auth"]
    wrong = await api.http.post(url, json=renewal(old, new, old_auth=guess))
    assert wrong.status_code == 404
    assert len(failures._hits.get("127.0.0.1", ())) == before + 1
    # The new endpoint obeys the endpoint rule: no POSTs into the private network.
    private = await api.http.post(url, json=renewal(old, new, endpoint="https://10.0.0.1/x"))
    assert private.status_code == 400 and error(private)["field"] == "endpoint"
    bad_key = await api.http.post(
        url, json=renewal(old, new, keys={"p256dh": "BAAA", "auth": new.to_json()["keys"]["auth"]})
    )
    assert bad_key.status_code == 400 and error(bad_key)["field"] == "keys.p256dh"
    async with gateway_of(api).read() as s:
        [row] = (await s.scalars(select(PushSubscriptionRow))).all()
    assert row.endpoint == old.to_json()["endpoint"]  # nothing half-written
    # A device whose login ended (logged out, expired) is not pushed: its pair
    # proves nothing either. (Revoking deletes the device and its subscription.)
    async with gateway_of(api).write() as s:
        device = await s.get(DeviceRow, made.json()["device_id"])
        assert device is not None
        token = await s.get(UserTokenRow, device.token_id)
        assert token is not None
        token.revoked_at = token.created_at
    assert (await api.http.post(url, json=renewal(old, new))).status_code == 404
