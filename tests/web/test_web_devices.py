"""Pairing a phone by QR, in-process on SQLite and PostgreSQL (docs/web.md,
"Pairing a phone"; docs/api.md, "Devices"): the pairing URL logs one browser in
once, within five minutes; a guessed code is refused and guessing is limited per
address; a revoked device's cookie stops working at its next request; devices
are their person's alone."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from mailui4agents.db.reach_tables import DevicePairingRow, DeviceRow
from mailui4agents.services import devices
from mailui4agents.services.identity import hash_token
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, Api, make_settings

pytestmark = pytest.mark.anyio

GUESSES = 5  # login_failures_per_address in this module


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(request, tmp_path, db_backend, login_failures_per_address=GUESSES)


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def pairing(api: Api, who: str, name: str = "Ana's phone", **extra: Any) -> dict[str, Any]:
    r = await api.http.post(
        "/api/v1/devices/pairings", json={"name": name, **extra}, headers=api.auth(who)
    )
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def code_of(url: str) -> str:
    m = re.fullmatch(r"http://gw/pair/([A-Za-z0-9_-]+)", url)
    assert m, url
    return m.group(1)


@pytest.fixture
async def phone(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """Another browser: its own cookies."""
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as c:
        yield c


async def use(browser: httpx.AsyncClient, url: str) -> httpx.Response:
    """What a person does on the phone: open the page, press its one button."""
    page = await browser.get(url)
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m, page.text
    return await browser.post(url, data={"csrf": m.group(1)})


async def test_the_pairing_url_logs_a_browser_in_once_and_only_its_post_uses_the_code(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    made = await pairing(api, "ana")
    code = code_of(made["url"])
    assert len(code) >= 22  # at least 128 bits of base64url
    expires = datetime.fromisoformat(made["code_expires_at"].replace("Z", "+00:00"))
    left = expires - datetime.now(UTC)
    assert timedelta(minutes=4) < left <= timedelta(minutes=5), left
    assert made["name"] == "Ana's phone" and made["user"] == "ana"

    # A link scanner or a chat preview fetching the URL uses nothing.
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as bot:
        for _ in range(2):
            seen = await bot.get(made["url"])
            assert seen.status_code == 200 and "am_web" not in seen.headers.get("set-cookie", "")
            assert "Log in on this device" in seen.text and "ana" in seen.text
            assert seen.headers["referrer-policy"] == "no-referrer"

    done = await use(phone, made["url"])
    assert done.status_code == 303 and done.headers["location"] == "/", done.text
    assert "am_web=" in done.headers["set-cookie"]
    home = await phone.get("/")
    assert home.status_code == 200 and 'class="who">ana<' in home.text  # logged in as ana

    # Only the hash is kept.
    async with gateway_of(api).read() as s:
        rows = (await s.scalars(select(DevicePairingRow))).all()
    assert [r.code_hash for r in rows] == [hash_token(code)]
    assert all(code not in str(vars(r)) for r in rows)

    # A second use, from any browser, is refused; the first session stays.
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as again:
        second = await again.get(made["url"])
        assert second.status_code == 404 and "Log in on this device" not in second.text
        refused = await again.post(made["url"], data={"csrf": again.cookies["am_login_csrf"]})
        assert refused.status_code == 404 and "am_web" not in refused.headers.get("set-cookie", "")
    assert (await phone.get("/")).status_code == 200

    listed = await api.http.get("/api/v1/devices", headers=api.auth("ana"))
    assert listed.status_code == 200
    [device] = listed.json()["items"]
    assert set(device) == {"id", "name", "created_at", "last_seen_at", "push", "push_notice"}
    assert device["name"] == "Ana's phone" and device["push"] is False
    tokens = await api.http.get("/api/v1/auth/tokens", headers=api.auth("ana"))
    assert "Ana's phone" in [t["name"] for t in tokens.json()["items"]]


async def test_the_button_needs_the_pair_pages_csrf_cookie(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    made = await pairing(api, "ana")
    forged = await phone.post(made["url"], data={"csrf": "x" * 43})  # another site's form
    assert forged.status_code == 403
    assert (await use(phone, made["url"])).status_code == 303  # the code was not used up


async def test_an_expired_code_is_refused(api: Api, phone: httpx.AsyncClient) -> None:
    await api.user("ana")
    made = await pairing(api, "ana")
    page = await phone.get(made["url"])
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    async with gateway_of(api).write() as s:  # five minutes later
        await s.execute(
            update(DevicePairingRow).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    late = await phone.post(made["url"], data={"csrf": csrf.group(1)})
    assert late.status_code == 404 and "am_web" not in late.headers.get("set-cookie", "")
    assert (await phone.get(made["url"])).status_code == 404
    assert (await phone.get("/")).status_code == 303  # not logged in


async def test_guessed_codes_are_refused_and_guessing_is_limited_per_address(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    made = await pairing(api, "ana")
    page = await phone.get("/pair/" + "A" * 43)
    assert page.status_code == 404  # one guess
    csrf = phone.cookies["am_login_csrf"]  # the pair page's double-submit cookie
    for n in range(GUESSES - 1):
        r = await phone.post(f"/pair/guess{n}{'x' * 38}", data={"csrf": csrf})
        assert r.status_code == 404, n
    over = await phone.post("/pair/" + "B" * 43, data={"csrf": csrf})
    assert over.status_code == 429 and int(over.headers["retry-after"]) > 0
    # Over the limit the right code is refused too (a guesser learns nothing) …
    right = await phone.post(made["url"], data={"csrf": csrf})
    assert right.status_code == 429 and "am_web" not in right.headers.get("set-cookie", "")
    assert (await phone.get(made["url"])).status_code == 429
    # … and so is a password login from that address: one budget per address.
    api_login = await api.http.post(
        "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    assert api_login.status_code == 429


async def test_a_revoked_device_s_cookie_stops_working_at_once(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    assert (await use(phone, (await pairing(api, "ana"))["url"])).status_code == 303
    assert (await phone.get("/")).status_code == 200
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    r = await api.http.delete(f"/api/v1/devices/{device['id']}", headers=api.auth("ana"))
    assert r.status_code == 200 and r.json() == {"revoked": device["id"]}
    gone = await phone.get("/")
    assert gone.status_code == 303 and gone.headers["location"].startswith("/login")
    assert (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"] == []
    again = await api.http.delete(f"/api/v1/devices/{device['id']}", headers=api.auth("ana"))
    assert again.status_code == 404


async def test_devices_are_their_person_s_alone(api: Api, phone: httpx.AsyncClient) -> None:
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude")
    assert (await use(phone, (await pairing(api, "ana"))["url"])).status_code == 303
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    path = f"/api/v1/devices/{device['id']}"
    for other in ("bob", "admin"):
        listed = await api.http.get("/api/v1/devices", headers=api.auth(other))
        assert listed.status_code == 200 and listed.json()["items"] == [], other
        assert (await api.http.delete(path, headers=api.auth(other))).status_code == 404, other
        renamed = await api.http.patch(path, json={"name": "mine"}, headers=api.auth(other))
        assert renamed.status_code == 404, other
    assert (await phone.get("/")).status_code == 200  # still ana's, still working
    claude = api.auth("claude")
    assert (await api.http.get("/api/v1/devices", headers=claude)).status_code == 403
    assert (await api.http.delete(path, headers=claude)).status_code == 403
    made = await api.http.post("/api/v1/devices/pairings", json={"name": "x"}, headers=claude)
    assert made.status_code == 403
    assert (await api.http.get("/api/v1/devices")).status_code == 401
    assert (await api.http.delete(path)).status_code == 401
    assert (await api.http.post("/api/v1/devices/pairings", json={"name": "x"})).status_code == 401
    # Its owner renames it; the token keeps the device's name.
    r = await api.http.patch(path, json={"name": "Ana's old phone"}, headers=api.auth("ana"))
    assert r.status_code == 200 and r.json()["name"] == "Ana's old phone"


async def test_an_admin_pairs_a_device_for_another_person_and_nobody_else_may(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    await api.user("bob")
    made = await pairing(api, "admin", "Ana's tablet", user="ana")
    assert made["user"] == "ana"
    assert (await use(phone, made["url"])).status_code == 303
    assert 'class="who">ana<' in (await phone.get("/")).text
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    assert device["name"] == "Ana's tablet"
    for body in ({"name": "x", "user": "ana"}, {"name": "x", "user": "admin"}):
        r = await api.http.post("/api/v1/devices/pairings", json=body, headers=api.auth("bob"))
        assert r.status_code == 403, body
    r = await api.http.post(
        "/api/v1/devices/pairings", json={"name": "x", "user": "nobody"}, headers=api.auth("admin")
    )
    assert r.status_code == 400 and r.json()["error"]["field"] == "user"
    mine = await pairing(api, "bob", "Bob's phone", user="bob")  # naming oneself is fine
    assert mine["user"] == "bob"
    for bad in ("", " ", "a" * 101, "tab\there"):
        r = await api.http.post(
            "/api/v1/devices/pairings", json={"name": bad}, headers=api.auth("bob")
        )
        assert r.status_code == 400, bad


async def test_the_devices_page_shows_the_qr_code_as_inline_svg_and_revokes(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    web = api.http
    form = await web.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    login = {"username": "ana", "password": "user-password-for-tests", "csrf": csrf.group(1)}
    assert (await web.post("/login", data={**login, "next": "/devices"})).status_code == 303
    page = await web.get("/devices")
    assert (
        page.status_code == 200 and "Pair a device" in page.text and 'href="/devices"' in page.text
    )
    token = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert token
    shown = await web.post("/devices/pair", data={"csrf": token.group(1), "name": "Ana's phone"})
    assert shown.status_code == 200
    assert re.search(r"<svg[^>]*>", shown.text) and "<script" not in shown.text.split("<main")[1]
    url = re.search(r'class="pairing-url"[^>]*>(http://gw/pair/[A-Za-z0-9_-]+)<', shown.text)
    assert url, shown.text
    assert (await use(phone, url.group(1))).status_code == 303
    listed = await web.get("/devices")
    assert "Ana&#39;s phone" in listed.text or "Ana's phone" in listed.text
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    r = await web.post(
        f"/devices/{device['id']}", data={"csrf": token.group(1), "action": "revoke"}
    )
    assert r.status_code == 303
    assert (await phone.get("/")).status_code == 303  # the phone is logged out
    no_csrf = await web.post(f"/devices/{device['id']}", data={"action": "revoke"})
    assert no_csrf.status_code == 403


async def test_last_seen_at_follows_the_device_s_requests_at_most_once_a_minute(
    api: Api, phone: httpx.AsyncClient
) -> None:
    await api.user("ana")
    assert (await use(phone, (await pairing(api, "ana"))["url"])).status_code == 303
    [device] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    assert device["last_seen_at"] == device["created_at"]  # seen when it paired
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    async with gateway_of(api).write() as s:
        await s.execute(update(DeviceRow).values(last_seen_at=an_hour_ago))
    devices._SEEN_MEMO.clear()  # this process's memory of recent writes: as after a minute
    assert (await phone.get("/")).status_code == 200
    [now] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    seen = datetime.fromisoformat(now["last_seen_at"].replace("Z", "+00:00"))
    assert seen > datetime.now(UTC) - timedelta(minutes=1), now
    async with gateway_of(api).write() as s:
        await s.execute(update(DeviceRow).values(last_seen_at=an_hour_ago))
    assert (await phone.get("/")).status_code == 200  # within the minute: not written again
    [later] = (await api.http.get("/api/v1/devices", headers=api.auth("ana"))).json()["items"]
    assert datetime.fromisoformat(later["last_seen_at"].replace("Z", "+00:00")) == an_hour_ago
