"""The /calendar page over HTTP in-process: list + form, CSRF, errors that name
the field, only one's own entries (admins: everyone's on request)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api
from tests.web.test_web_http import _csrf_of, _web_login

pytestmark = pytest.mark.anyio

FORM = {
    "to": "claude@/srv/shop",
    "cc": "",
    "subject": "weekly report",
    "body": "please send the report",
    "start_at": "2027-03-26T09:00",
    "timezone": "Europe/Berlin",
    "rrule": "FREQ=WEEKLY;COUNT=3",
}


async def _as(api: Api, name: str, password: str = USER_PASSWORD) -> httpx.AsyncClient:
    http = httpx.AsyncClient(transport=api.http._transport, base_url="http://gw")
    r = await _web_login(http, name, password)
    assert r.status_code == 303, r.text
    return http


async def test_the_page_schedules_lists_and_cancels_with_csrf(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude", ["/srv/shop"])
    ana = await _as(api, "ana")
    page = await ana.get("/calendar")
    assert page.status_code == 200 and "Nothing scheduled." in page.text
    assert 'href="/calendar" aria-current="page"' in page.text  # in the nav
    csrf = _csrf_of(page.text)

    refused = await ana.post("/calendar", data=FORM)  # no CSRF token
    assert refused.status_code == 403
    assert (await ana.get("/calendar")).text.count('class="card cal-entry"') == 0

    done = await ana.post("/calendar", data={**FORM, "csrf": csrf})
    assert done.status_code == 303 and done.headers["location"].startswith("/calendar#entry-")
    page = await ana.get("/calendar")
    assert "weekly report" in page.text and "FREQ=WEEKLY;COUNT=3" in page.text
    assert "2027-03-26 08:00 UTC" in page.text  # 09:00 in Berlin, winter time
    entry_id = re.search(r'id="entry-([0-9a-f-]+)"', page.text).group(1)  # type: ignore[union-attr]

    r = await ana.post(f"/calendar/{entry_id}", data={"action": "cancel"})
    assert r.status_code == 403  # CSRF on every form
    r = await ana.post(f"/calendar/{entry_id}", data={"action": "cancel", "csrf": csrf})
    assert r.status_code == 303
    assert 'data-status="cancelled"' in (await ana.get("/calendar")).text
    await ana.aclose()


async def test_a_bad_field_comes_back_in_the_form_with_the_field_named(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude", ["/srv/shop"])
    ana = await _as(api, "ana")
    csrf = _csrf_of((await ana.get("/calendar")).text)
    r = await ana.post("/calendar", data={**FORM, "timezone": "Mars/Olympus", "csrf": csrf})
    assert r.status_code == 400
    assert "timezone" in r.text and "Mars/Olympus" in r.text
    assert 'value="weekly report"' in r.text  # what was typed is kept
    assert "Nothing scheduled." in r.text  # and nothing was written
    await ana.aclose()


async def test_one_sees_only_ones_own_entries_and_admins_everyone_on_request(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude", ["/srv/shop"])
    ana = await _as(api, "ana")
    csrf = _csrf_of((await ana.get("/calendar")).text)
    assert (await ana.post("/calendar", data={**FORM, "csrf": csrf})).status_code == 303
    bob = await _as(api, "bob")
    assert "weekly report" not in (await bob.get("/calendar")).text
    assert (await bob.get("/calendar?everyone=true")).status_code == 400
    entry_id = re.search(r'id="entry-([0-9a-f-]+)"', (await ana.get("/calendar")).text).group(1)  # type: ignore[union-attr]
    csrf_bob = _csrf_of((await bob.get("/calendar")).text)
    r = await bob.post(f"/calendar/{entry_id}", data={"action": "cancel", "csrf": csrf_bob})
    assert r.status_code == 404
    admin = await _as(api, "admin", ADMIN_PASSWORD)
    assert "weekly report" not in (await admin.get("/calendar")).text
    assert "weekly report" in (await admin.get("/calendar?everyone=true")).text
    anon = httpx.AsyncClient(transport=api.http._transport, base_url="http://gw")
    r = await anon.get("/calendar")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    for c in (ana, bob, admin, anon):
        await c.aclose()
