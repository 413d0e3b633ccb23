"""E-mail addresses over HTTP (docs/email.md, "Addresses"): a person adds one, a
verification link is mailed to it through a real SMTP relay, the link's GET
changes nothing (mail scanners follow links) and its POST verifies, once,
before it expires. Each side: anonymous 401, agent 403, another person and an
admin 404; each bad field named; the limits."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from mailui4agents.db.reach_tables import EmailAddressRow, EmailOutboxRow
from mailui4agents.db.types import utcnow
from tests.conftest import ADMIN_PASSWORD, Api, fast_settings, started_app
from tests.email.conftest import MAIL_FROM, gateway_of, link_token
from tests.fakes.smtp_relay import Relay

pytestmark = pytest.mark.anyio

EMAILS = "/api/v1/me/emails"


def error(r: httpx.Response) -> dict[str, Any]:
    e: dict[str, Any] = r.json()["error"]
    return e


async def add(api: Api, who: str, address: str) -> httpx.Response:
    return await api.http.post(EMAILS, json={"address": address}, headers=api.auth(who))


async def listed(api: Api, who: str) -> list[dict[str, Any]]:
    r = await api.http.get(EMAILS, headers=api.auth(who))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def settle(api: Api, outbox_ids: list[str]) -> dict[str, str]:
    sender = gateway_of(api).email
    assert sender is not None
    return await sender.wait_final(outbox_ids, 10)


async def outbox_rows(api: Api) -> list[EmailOutboxRow]:
    async with gateway_of(api).read() as s:
        return list(await s.scalars(select(EmailOutboxRow).order_by(EmailOutboxRow.created_at)))


async def test_anonymous_401_and_agent_403_everywhere(people: Api) -> None:
    api = people
    for method, path in (("GET", EMAILS), ("POST", EMAILS), ("DELETE", f"{EMAILS}/x")):
        body = {"address": "a@example.org"} if method == "POST" else None
        anon = await api.http.request(method, path, json=body)
        assert anon.status_code == 401, (method, anon.text)
        agent = await api.http.request(method, path, json=body, headers=api.auth("agent-a"))
        assert agent.status_code == 403, (method, agent.text)
    stats = await api.http.get("/api/v1/email/stats", headers=api.auth("ana"))
    assert stats.status_code == 403


async def test_the_link_is_mailed_its_get_changes_nothing_its_post_verifies_once(
    people: Api, relay: Relay
) -> None:
    api = people
    r = await add(api, "ana", "  Ana@Example.ORG ")
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["address"] == "ana@example.org" and out["verified"] is False
    assert out["last_mail"]["state"] == "queued" and out["verify_expires_at"]

    [got] = await relay.wait_async(1)
    assert got.rcpt_tos == ["ana@example.org"] and got.mail_from == MAIL_FROM
    msg = got.message
    assert msg["To"] == "ana@example.org" and msg["From"] == MAIL_FROM
    assert msg["Message-ID"] == out["last_mail"]["message_id"]
    assert msg["Message-ID"].endswith("@gw.test>")
    body = msg.get_body(("plain",))
    assert body is not None
    token = link_token(body.get_content())

    [row] = await outbox_rows(api)
    assert (await settle(api, [row.id]))[row.id] == "sent"
    [item] = await listed(api, "ana")
    assert item["last_mail"]["state"] == "sent" and item["last_mail"]["status_code"] == 250
    # Only the token's hash is kept, and the mail that carried it is erased once sent.
    async with gateway_of(api).read() as s:
        addr = await s.scalar(select(EmailAddressRow))
        sent = await s.get(EmailOutboxRow, row.id)
    assert addr is not None and sent is not None
    assert addr.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert sent.message is None

    page = await api.http.get(f"/verify-email/{token}")  # what a scanner does
    assert page.status_code == 200 and "Verify this address" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert (await listed(api, "ana"))[0]["verified"] is False

    done = await api.http.post(f"/verify-email/{token}")
    assert done.status_code == 200 and "is verified" in done.text
    [item] = await listed(api, "ana")
    assert item["verified"] is True and item["verified_at"] and item["verify_expires_at"] is None

    assert (await api.http.post(f"/verify-email/{token}")).status_code == 404  # single use
    assert (await api.http.get(f"/verify-email/{token}")).status_code == 404
    again = await add(api, "ana", "ana@example.org")
    assert again.status_code == 409 and error(again)["reason"] == "already_verified"


async def test_an_expired_or_unknown_link_verifies_nothing(people: Api, relay: Relay) -> None:
    api = people
    assert (await add(api, "ana", "ana@example.org")).status_code == 201
    [got] = await relay.wait_async(1)
    body = got.message.get_body(("plain",))
    assert body is not None
    token = link_token(body.get_content())
    async with gateway_of(api).write() as s:
        await s.execute(
            update(EmailAddressRow).values(token_expires_at=utcnow() - timedelta(seconds=1))
        )
    assert (await api.http.get(f"/verify-email/{token}")).status_code == 404
    assert (await api.http.post(f"/verify-email/{token}")).status_code == 404
    assert (await api.http.post("/verify-email/not-a-token")).status_code == 404
    assert (await listed(api, "ana"))[0]["verified"] is False


async def test_adding_again_sends_a_new_link_and_the_old_one_dies(
    people: Api, relay: Relay
) -> None:
    api = people
    assert (await add(api, "ana", "ana@example.org")).status_code == 201
    again = await add(api, "ana", "ana@example.org")
    assert again.status_code == 200, again.text
    first, second = await relay.wait_async(2)
    tokens = []
    for got in (first, second):
        body = got.message.get_body(("plain",))
        assert body is not None
        tokens.append(link_token(body.get_content()))
    assert first.message["Message-ID"] != second.message["Message-ID"]
    assert (await api.http.post(f"/verify-email/{tokens[0]}")).status_code == 404
    assert (await api.http.post(f"/verify-email/{tokens[1]}")).status_code == 200
    assert len(await listed(api, "ana")) == 1


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "no-at-sign",
        "two@@example.org",
        "a@b@example.org",
        "ana@localhost",
        "ana@127.0.0.1",
        "ana smith@example.org",
        '"quoted"@example.org',
        ".ana@example.org",
        "ana@-example.org",
        "ana@example.org\r\nBcc: x@evil.test",
        "x" * 65 + "@example.org",
    ],
)
async def test_a_bad_address_is_400_naming_address(people: Api, bad: str) -> None:
    r = await add(people, "ana", bad)
    assert r.status_code == 400, (bad, r.text)
    assert error(r)["field"] == "address"


async def test_bad_bodies_are_400_naming_the_field(people: Api) -> None:
    api = people
    missing = await api.http.post(EMAILS, json={}, headers=api.auth("ana"))
    assert missing.status_code == 400 and error(missing)["field"] == "address"
    extra = await api.http.post(
        EMAILS, json={"address": "a@example.org", "verified": True}, headers=api.auth("ana")
    )
    assert extra.status_code == 400 and error(extra)["field"] == "verified"
    wrong = await api.http.post(EMAILS, json={"address": 5}, headers=api.auth("ana"))
    assert wrong.status_code == 400 and error(wrong)["field"] == "address"


async def test_another_person_and_an_admin_neither_see_nor_remove_yours(people: Api) -> None:
    api = people
    mine = (await add(api, "ana", "ana@example.org")).json()
    assert await listed(api, "bob") == []
    assert await listed(api, "admin") == []
    for who in ("bob", "admin"):
        r = await api.http.delete(f"{EMAILS}/{mine['id']}", headers=api.auth(who))
        assert r.status_code == 404, (who, r.text)
    assert [i["id"] for i in await listed(api, "ana")] == [mine["id"]]
    gone = await api.http.delete(f"{EMAILS}/{mine['id']}", headers=api.auth("ana"))
    assert gone.status_code == 200 and gone.json() == {"removed": mine["id"]}
    assert await listed(api, "ana") == []
    assert (
        await api.http.delete(f"{EMAILS}/{mine['id']}", headers=api.auth("ana"))
    ).status_code == 404


async def test_an_address_verified_by_one_person_cannot_be_verified_by_another(
    people: Api, relay: Relay
) -> None:
    api = people
    await add(api, "ana", "shared@example.org")
    await add(api, "bob", "shared@example.org")
    ana_mail, bob_mail = await relay.wait_async(2)
    tokens = {}
    for got in (ana_mail, bob_mail):
        body = got.message.get_body(("plain",))
        assert body is not None
        text = body.get_content()
        tokens["ana" if "as ana " in text else "bob"] = link_token(text)
    assert (await api.http.post(f"/verify-email/{tokens['ana']}")).status_code == 200
    taken = await api.http.post(f"/verify-email/{tokens['bob']}")
    assert taken.status_code == 409 and "another person" in taken.text
    assert (await listed(api, "bob"))[0]["verified"] is False


@pytest.mark.parametrize("settings", [{"email_max_addresses": 2}], indirect=True)
async def test_a_person_may_have_at_most_email_max_addresses(people: Api) -> None:
    api = people
    assert (await add(people, "ana", "a1@example.org")).status_code == 201
    assert (await add(people, "ana", "a2@example.org")).status_code == 201
    third = await add(api, "ana", "a3@example.org")
    assert third.status_code == 409 and error(third)["reason"] == "too_many_addresses"
    assert (await add(api, "bob", "b1@example.org")).status_code == 201  # per person


@pytest.mark.parametrize("settings", [{"email_verify_per_hour": 3}], indirect=True)
async def test_at_most_email_verify_per_hour_verification_mails(people: Api) -> None:
    api = people
    for expected in (201, 200, 200):
        assert (await add(api, "ana", "ana@example.org")).status_code == expected
    over = await add(api, "ana", "ana@example.org")
    assert over.status_code == 429, over.text
    assert 3500 < int(over.headers["retry-after"]) <= 3601
    over_new = await add(api, "ana", "other@example.org")  # a new address is a mail too
    assert over_new.status_code == 429
    assert (await add(api, "bob", "bob@example.org")).status_code == 201
    # An hour later the window has room again.
    async with gateway_of(api).write() as s:
        await s.execute(
            update(EmailOutboxRow).values(created_at=utcnow() - timedelta(seconds=3601))
        )
    assert (await add(api, "ana", "ana@example.org")).status_code == 200


async def test_a_gateway_without_smtp_refuses_to_add_an_address(tmp_path: Any) -> None:
    settings = fast_settings(tmp_path)
    async with (
        started_app(settings) as app,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c,
    ):
        api = Api(c)

        await api.login("admin", ADMIN_PASSWORD)
        r = await add(api, "admin", "admin@example.org")
        assert r.status_code == 409 and error(r)["reason"] == "email_not_configured"
        stats = await c.get("/api/v1/email/stats", headers=api.auth("admin"))
        assert stats.status_code == 200 and stats.json()["configured"] is False


@pytest.mark.parametrize("settings", [{"email_verify_per_hour": 2}], indirect=True)
async def test_removing_and_adding_again_does_not_reset_the_hourly_limit(people: Api) -> None:
    api = people
    for _ in range(2):
        made = await add(api, "ana", "ana@example.org")
        assert made.status_code == 201, made.text
        gone = await api.http.delete(f"{EMAILS}/{made.json()['id']}", headers=api.auth("ana"))
        assert gone.status_code == 200
    assert (await add(api, "ana", "ana@example.org")).status_code == 429


async def test_e_mail_queued_to_a_removed_address_is_not_sent(
    people: Api, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = people
    sender = gateway_of(api).email
    assert sender is not None

    async def idle() -> None:
        return None

    monkeypatch.setattr(sender, "send_pass", idle)  # it stays queued
    made = (await add(api, "ana", "ana@example.org")).json()
    [row] = await outbox_rows(api)
    r = await api.http.delete(f"{EMAILS}/{made['id']}", headers=api.auth("ana"))
    assert r.status_code == 200
    monkeypatch.undo()
    await sender.send_pass()
    [after] = await outbox_rows(api)
    assert after.id == row.id and after.state == "failed" and after.address_id is None
    assert after.message is None and "removed" in (after.detail or "")
    assert relay.messages == []
