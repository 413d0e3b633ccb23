"""The "Notifications" settings page in-process (docs/remote.md, "Notification
policy"): the person's own policy in one form, saved with the CSRF token as
every form, a refusal shown in the form naming the field."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import Api
from tests.web.forms import browser, csrf_of

pytestmark = pytest.mark.anyio

PRESENCE = "/api/v1/me/presence"
FULL = {
    "push": "on",
    "email": "on",
    "email_mail": "on",
    "skip_when_visible": "on",
    "push_content": "preview",
    "quiet_start": "",
    "quiet_end": "",
    "timezone": "UTC",
    "remind_after_min": "",
    "escalate_after_min": "",
    "email_digest_hour": "",
}


async def test_the_form_shows_and_saves_the_persons_own_policy(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    async with browser(api, "ana") as ana:
        page = await ana.get("/notifications")
        assert page.status_code == 200
        assert "<h1>Notifications</h1>" in page.text
        assert 'name="push" id="push" checked' in page.text
        assert 'value="UTC"' in page.text
        # The Devices page links here.
        assert 'href="/notifications"' in (await ana.get("/devices")).text
        form = {
            **FULL,
            "csrf": csrf_of(page.text),
            "quiet_start": "22:00",
            "quiet_end": "07:00",
            "timezone": "Europe/Madrid",
            "remind_after_min": "15",
            "push_content": "none",
            "email_digest_hour": "8",
        }
        del form["email"]  # an unticked box is not sent
        saved = await ana.post("/notifications", data=form)
        assert saved.status_code == 303 and saved.headers["location"] == "/notifications?saved=1"
        again = await ana.get("/notifications?saved=1")
        assert "Saved." in again.text
        assert 'name="email" id="email">' in again.text  # no longer checked
        assert 'value="22:00"' in again.text and 'value="Europe/Madrid"' in again.text
        assert re.search(r'id="email_digest_hour"[^>]*value="8"', again.text)
    got = await api.http.get("/api/v1/me/notify-policy", headers=api.auth("ana"))
    assert got.json() == {
        "push": True,
        "email": False,
        "email_mail": True,
        "push_content": "none",
        "skip_when_visible": True,
        "quiet_start": "22:00",
        "quiet_end": "07:00",
        "timezone": "Europe/Madrid",
        "remind_after_min": 15,
        "escalate_after_min": None,
        "email_digest_hour": 8,
    }
    # bob's page shows bob's (the defaults), not ana's.
    async with browser(api, "bob") as bob:
        page = await bob.get("/notifications")
        assert 'value="Europe/Madrid"' not in page.text and 'value="UTC"' in page.text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"quiet_start": "22:00"}, "quiet_end"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"remind_after_min": "0"}, "remind_after_min"),
        ({"escalate_after_min": "ten"}, "escalate_after_min"),
        ({"push_content": "all"}, "push_content"),
        ({"email_digest_hour": "24"}, "email_digest_hour"),
        ({"email_digest_hour": "at 7"}, "email_digest_hour"),
    ],
)
async def test_a_refusal_comes_back_in_the_form_naming_the_field(
    api: Api, change: dict[str, str], field: str
) -> None:
    await api.user("ana")
    async with browser(api, "ana") as ana:
        page = await ana.get("/notifications")
        r = await ana.post("/notifications", data={**FULL, **change, "csrf": csrf_of(page.text)})
        assert r.status_code == 400, r.text
        assert 'role="alert"' in r.text and field in r.text
        assert f'id="{field}"' in r.text
        assert re.search(rf'id="{field}"[^>]*aria-invalid="true"', r.text), field
        if field != "push_content":  # what was typed is kept (a select shows its options)
            assert all(f'value="{v}"' in r.text for v in change.values())
    got = await api.http.get("/api/v1/me/notify-policy", headers=api.auth("ana"))
    assert got.json()["timezone"] == "UTC" and got.json()["quiet_start"] is None


async def test_the_form_needs_a_login_and_its_csrf_token(api: Api) -> None:
    await api.user("ana")
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as anon:
        r = await anon.get("/notifications")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        r = await anon.post("/notifications", data={**FULL, "push": ""})
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
    async with browser(api, "ana") as ana:
        r = await ana.post("/notifications", data={**FULL, "timezone": "Europe/Madrid"})
        assert r.status_code == 403
        r = await ana.post(
            "/notifications", data={**FULL, "timezone": "Europe/Madrid", "csrf": "wrong"}
        )
        assert r.status_code == 403
    got = await api.http.get("/api/v1/me/notify-policy", headers=api.auth("ana"))
    assert got.json()["timezone"] == "UTC"


async def test_a_pages_presence_beacon_takes_its_cookie_and_csrf_token(api: Api) -> None:
    """static/app.js posts {visible} with the session cookie and X-CSRF-Token."""
    await api.user("ana")
    async with browser(api, "ana") as ana:
        csrf = csrf_of((await ana.get("/")).text)
        # A cookie alone is what another site's request would carry: refused.
        bare = await ana.post(PRESENCE, json={"visible": True})
        assert bare.status_code == 403, bare.text
        wrong = await ana.post(PRESENCE, json={"visible": True}, headers={"X-CSRF-Token": "x"})
        assert wrong.status_code == 403
        r = await ana.post(PRESENCE, json={"visible": True}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200 and r.json()["visible_until"] is not None, r.text
        r = await ana.post(PRESENCE, json={"visible": False}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200 and r.json()["visible_until"] is None
        # Logged out: the cookie is worthless.
        await ana.post("/logout", data={"csrf": csrf})
        r = await ana.post(PRESENCE, json={"visible": True}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 401
