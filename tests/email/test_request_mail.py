"""A permission request e-mailed to its deciders (docs/email.md, "Request
e-mails"), through a real SMTP relay: who gets it (verified addresses, e-mail on
in the policy), what it says (subject, masked input, plain text and sanitised
HTML) and that a session is one thread; its outcome is in the request's
deliveries."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.reach_tables import EmailOutboxRow
from mailui4agents.db.tables import SessionRow
from mailui4agents.services import email_tokens
from tests.conftest import Api
from tests.email.conftest import gateway_of, link_token
from tests.fakes.smtp_relay import Received, Relay

pytestmark = pytest.mark.anyio

SECRET = "AKIAIOSFODNN7EXAMPLE"  # an AWS access key id: masked everywhere


@pytest.fixture
async def team(people: Api, relay: Relay) -> dict[str, Any]:
    """ana (verified address) owns a session of agent-a; bob decides too, his
    address unverified. The verification mails are received already."""
    api = people
    for who, address in (("ana", "ana@example.org"), ("bob", "bob@example.org")):
        r = await api.http.post(
            "/api/v1/me/emails", json={"address": address}, headers=api.auth(who)
        )
        assert r.status_code == 201, r.text
    [ana_mail] = [m for m in await relay.wait_async(2) if m.rcpt_tos == ["ana@example.org"]]
    body = ana_mail.message.get_body(("plain",))
    assert body is not None
    verified = await api.http.post(f"/verify-email/{link_token(body.get_content())}")
    assert verified.status_code == 200
    r = await api.send("ana", ["agent-a@/srv/shop.new"], subject="fix the login")
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    async with gateway_of(api).read() as s:
        session = await s.get(SessionRow, sid)
    assert session is not None and session.alias
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code in (200, 201), r.text
    relay.messages.clear()
    return {"sid": sid, "tag": f"[shop.{session.alias}]"}


async def ask(api: Api, sid: str, tool_input: dict[str, Any]) -> str:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
              "tool_input": tool_input},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


def parts(got: Received) -> tuple[str, str]:
    plain, rich = got.message.get_body(("plain",)), got.message.get_body(("html",))
    assert plain is not None and rich is not None
    return plain.get_content(), rich.get_content()


async def test_a_request_mails_each_verified_decider_masked_in_the_sessions_thread(
    people: Api, relay: Relay, team: dict[str, Any]
) -> None:
    api = people
    rid = await ask(api, team["sid"], {"command": f"AWS_KEY={SECRET} deploy <script>x</script>"})
    [got] = await relay.wait_async(1)
    assert got.rcpt_tos == ["ana@example.org"]  # bob's address is unverified
    msg = got.message
    assert msg["Subject"] == f"{team['tag']} Approval: Bash from agent-a", msg["Subject"]
    root = msg["In-Reply-To"]
    assert root.startswith(f"<session.{team['sid']}@")
    # References: the thread, then this copy's reply token (services/email_tokens.py).
    assert msg["References"].split()[0] == root
    [token] = email_tokens.tokens_in_references(msg["References"])
    assert msg["Reply-To"] == email_tokens.reply_address("agentmail@gw.test", token)
    assert msg["Message-ID"] != root
    plain, rich = parts(got)
    assert SECRET not in plain and SECRET not in rich and SECRET not in got.data.decode()
    assert "deploy" in plain and "***" in plain
    assert "<script>" not in rich and "&lt;script&gt;" in rich

    # The second request of the session is in the same thread.
    await ask(api, team["sid"], {"command": "make test"})
    _, second = await relay.wait_async(2)
    assert second.message["In-Reply-To"] == root
    assert second.message["References"].split()[0] == root
    assert email_tokens.tokens_in_references(second.message["References"]) != [token]
    assert second.message["Message-ID"] != msg["Message-ID"]

    sender = gateway_of(api).email
    assert sender is not None
    async with gateway_of(api).read() as s:
        ids = list(
            await s.scalars(select(EmailOutboxRow.id).where(EmailOutboxRow.request_id == rid))
        )
    assert len(ids) == 1 and (await sender.wait_final(ids, 10)) == {ids[0]: "sent"}
    r = await api.http.get(f"/api/v1/permissions/{rid}/deliveries", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    got_rows = [(d["person"], d["state"]) for d in r.json() if d["channel"] == "email"]
    assert got_rows == [("ana", "queued"), ("ana", "sent")], r.json()


async def test_no_mail_when_the_policy_has_e_mail_off(
    people: Api, relay: Relay, team: dict[str, Any]
) -> None:
    api = people
    r = await api.http.put(
        "/api/v1/me/notify-policy", json={"email": False}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    rid = await ask(api, team["sid"], {"command": "make deploy"})
    sender = gateway_of(api).email
    assert sender is not None
    await sender.send_pass()
    assert relay.messages == []
    r = await api.http.get(f"/api/v1/permissions/{rid}/deliveries", headers=api.auth("ana"))
    assert [d for d in r.json() if d["channel"] == "email"] == []
