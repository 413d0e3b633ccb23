"""The "E-mail" settings page in-process (docs/email.md, "Addresses";
docs/web.md): a person lists, adds and removes their own addresses, through the
same service as the API, with a real SMTP relay receiving the verification
mail; every POST carries the CSRF token; a refusal comes back in the form,
naming the field; another person's address is 404."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.settings import Settings
from tests.conftest import Api, make_settings
from tests.fakes.smtp_relay import Relay, smtp_relay
from tests.web.forms import browser, csrf_of

pytestmark = pytest.mark.anyio

LINK = re.compile(r"http://gw/verify-email/([A-Za-z0-9_-]+)")


@pytest.fixture
def relay() -> Iterator[Relay]:
    with smtp_relay() as r:
        yield r


@pytest.fixture
def settings(
    tmp_path: Path, db_backend: str, request: pytest.FixtureRequest, relay: Relay
) -> Settings:
    extra: dict[str, Any] = getattr(request, "param", {"smtp_url": relay.url})
    return make_settings(
        request, tmp_path, db_backend, mail_from="agentmail@gw.test", email_poll_s=0.5, **extra
    )


async def addresses(api: Api, who: str) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/me/emails", headers=api.auth(who))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def test_a_person_adds_verifies_and_removes_an_address(api: Api, relay: Relay) -> None:
    await api.user("ana")
    async with browser(api, "ana") as ana:
        page = await ana.get("/emails")
        assert page.status_code == 200
        assert "<h1>E-mail</h1>" in page.text and "No e-mail addresses." in page.text
        # The notification settings and the devices page link here.
        assert 'href="/emails"' in (await ana.get("/notifications")).text
        assert 'href="/emails"' in (await ana.get("/devices")).text

        added = await ana.post(
            "/emails", data={"csrf": csrf_of(page.text), "address": " Ana@Example.org "}
        )
        assert added.status_code == 303, added.text
        assert added.headers["location"] == "/emails?added=ana@example.org"
        page = await ana.get(added.headers["location"])
        assert "A link was mailed to ana@example.org" in page.text
        assert "ana@example.org" in page.text and "not verified" in page.text
        [mail] = await relay.wait_async(1)
        assert mail.rcpt_tos == ["ana@example.org"]
        body = mail.message.get_body(("plain",))
        assert body is not None
        found = LINK.search(body.get_content())
        assert found, body.get_content()
        verified = await ana.post(f"/verify-email/{found.group(1)}")
        assert verified.status_code == 200, verified.text

        page = await ana.get("/emails")
        assert '<span class="chip">verified</span>' in page.text
        assert "last e-mail: " in page.text  # the verification mail
        [row] = await addresses(api, "ana")
        assert row["verified"] is True
        assert f'id="email-{row["id"]}"' in page.text

        removed = await ana.post(
            f"/emails/{row['id']}", data={"csrf": csrf_of(page.text), "action": "remove"}
        )
        assert removed.status_code == 303 and removed.headers["location"] == "/emails?removed=1"
        assert "Removed." in (await ana.get("/emails?removed=1")).text
    assert await addresses(api, "ana") == []


async def test_a_refusal_comes_back_in_the_form_and_csrf_is_checked(api: Api, relay: Relay) -> None:
    await api.user("ana")
    async with browser(api, "ana") as ana:
        page = await ana.get("/emails")
        bad = await ana.post(
            "/emails", data={"csrf": csrf_of(page.text), "address": "ana@localhost"}
        )
        assert bad.status_code == 400, bad.text
        assert 'aria-invalid="true"' in bad.text and 'value="ana@localhost"' in bad.text
        assert 'role="alert" id="email-error"' in bad.text
        # No CSRF token, or another's: 403, nothing added.
        assert (await ana.post("/emails", data={"address": "ana@example.org"})).status_code == 403
        r = await ana.post("/emails", data={"csrf": "0" * 64, "address": "ana@example.org"})
        assert r.status_code == 403
        # JSON for a fetch, as every form.
        r = await ana.post(
            "/emails",
            data={"csrf": csrf_of(page.text), "address": "nope"},
            headers={"Accept": "application/json"},
        )
        assert r.status_code == 400 and r.json()["error"]["field"] == "address"
    assert await addresses(api, "ana") == []


async def test_addresses_are_their_persons_alone(api: Api, relay: Relay) -> None:
    await api.user("ana")
    await api.user("bob")
    r = await api.http.post(
        "/api/v1/me/emails", json={"address": "ana@example.org"}, headers=api.auth("ana")
    )
    assert r.status_code == 201, r.text
    ana_id = r.json()["id"]
    async with browser(api, "bob") as bob:
        page = await bob.get("/emails")
        assert "ana@example.org" not in page.text and "No e-mail addresses." in page.text
        r = await bob.post(
            f"/emails/{ana_id}", data={"csrf": csrf_of(page.text), "action": "remove"}
        )
        assert r.status_code == 404, r.text
        r = await bob.post(f"/emails/{ana_id}", data={"csrf": csrf_of(page.text), "action": "drop"})
        assert r.status_code == 400 and "action" in r.text
    assert [a["address"] for a in await addresses(api, "ana")] == ["ana@example.org"]
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as anon:
        r = await anon.get("/emails")
        assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Femails"


@pytest.mark.parametrize("settings", [{}], indirect=True)  # no smtp_url: no e-mail
async def test_a_gateway_without_e_mail_says_so(api: Api) -> None:
    await api.user("ana")
    async with browser(api, "ana") as ana:
        page = await ana.get("/emails")
        assert "This gateway sends no e-mail yet" in page.text
        r = await ana.post("/emails", data={"csrf": csrf_of(page.text), "address": "a@b.org"})
        assert r.status_code == 409 and "sends no e-mail" in r.text
    assert await addresses(api, "ana") == []
