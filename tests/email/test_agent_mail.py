"""An agent's mail e-mailed to the people it is delivered to (docs/email.md,
"Agents' mails by e-mail"), through a real SMTP relay: one Message-ID per mail,
one copy per verified address with its own reply token, in the session's
thread; attachments as MIME parts up to email_attach_max_bytes, then links; the
policy's `email_mail` switch; nothing for the sender, unverified addresses, or
a person's own mail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.reach_tables import EmailOutboxRow
from mailui4agents.db.tables import SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import email_inbound, email_tokens
from tests.conftest import Api
from tests.email import replies
from tests.email.conftest import MAIL_FROM, gateway_of, link_token
from tests.fakes.smtp_relay import Received, Relay

pytestmark = pytest.mark.anyio

SMALL = bytes(range(256)) * 4  # 1 KiB, every byte value
BIG = b"\x00\xffbig" * 1000  # 5000 bytes: over the limit below
LIMIT = {"email_attach_max_bytes": 2048, "public_url": "https://agentmail.example.org"}


async def verify(api: Api, relay: Relay, who: str, address: str) -> None:
    relay.messages.clear()
    r = await api.http.post("/api/v1/me/emails", json={"address": address}, headers=api.auth(who))
    assert r.status_code == 201, r.text
    [got] = await relay.wait_async(1)
    body = got.message.get_body(("plain",))
    assert body is not None
    done = await api.http.post(f"/verify-email/{link_token(body.get_content())}")
    assert done.status_code == 200
    relay.messages.clear()


@pytest.fixture
async def thread(people: Api, relay: Relay) -> dict[str, Any]:
    """ana (verified) starts a session with agent-a, cc bob (verified too);
    carol's address stays unverified. Nothing is in the relay after it."""
    api = people
    await api.user("carol")
    await verify(api, relay, "ana", "ana@example.org")
    await verify(api, relay, "bob", "bob@example.org")
    r = await api.http.post(
        "/api/v1/me/emails", json={"address": "carol@example.org"}, headers=api.auth("carol")
    )
    assert r.status_code == 201, r.text
    await relay.wait_async(1)
    r = await api.send(
        "ana", ["agent-a@/srv/shop.new"], subject="fix the login", cc=["bob@/srv/shop"]
    )
    assert r.status_code == 201, r.text
    first = r.json()
    async with gateway_of(api).read() as s:
        session = await s.get(SessionRow, first["session_id"])
    assert session is not None and session.alias
    sender = gateway_of(api).email
    assert sender is not None
    await sender.send_pass()
    relay.messages.clear()
    return {"sid": first["session_id"], "first": first["id"], "tag": f"[shop.{session.alias}]"}


async def upload(api: Api, name: str, data: bytes, ctype: str) -> str:
    r = await api.http.post(
        "/api/v1/agent/attachments", files={"file": (name, data, ctype)},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    att: str = r.json()["attachment_id"]
    return att


async def reply(api: Api, parent: str, **extra: Any) -> dict[str, Any]:
    r = await api.send(
        "agent-a", ["ana@/srv/shop"], subject="Re: fix the login",
        body="Fixed: see **the diff**.\n\nFrom now on it works.\n<script>x</script>",
        parent_mail_id=parent, **extra,
    )  # fmt: skip
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def by_rcpt(messages: list[Received]) -> dict[str, Received]:
    return {m.rcpt_tos[0]: m for m in messages}


@pytest.mark.parametrize("settings", [LIMIT], indirect=True)
async def test_an_agents_mail_reaches_each_verified_person_in_the_sessions_thread(
    people: Api, relay: Relay, thread: dict[str, Any]
) -> None:
    api = people
    small = await upload(api, "notes.bin", SMALL, "application/octet-stream")
    big = await upload(api, "big.bin", BIG, "application/octet-stream")
    mail = await reply(api, thread["first"], cc=["bob@/srv/shop"], attachment_ids=[small, big])
    got = by_rcpt(await relay.wait_async(2))
    assert sorted(got) == ["ana@example.org", "bob@example.org"]  # not carol, not the agent
    ana, bob = got["ana@example.org"].message, got["bob@example.org"].message
    domain = MAIL_FROM.split("@")[1]
    mid = f"<mail.{mail['id']}@{domain}>"
    root = f"<session.{thread['sid']}@{domain}>"
    parent = f"<mail.{thread['first']}@{domain}>"
    for msg in (ana, bob):  # one mail, one Message-ID, whoever it goes to
        assert msg["Message-ID"] == mid
        assert msg["In-Reply-To"] == parent
        assert msg["References"].split()[:2] == [root, parent]
        assert msg["Subject"] == f"{thread['tag']} Re: fix the login"
        assert msg["From"].addresses[0].display_name == "agent-a"
        assert msg["From"].addresses[0].addr_spec == MAIL_FROM  # the gateway's, not the agent's
        assert msg["Auto-Submitted"] == "auto-generated"
    # Each copy names its addressee with the address it goes to, the others by name.
    assert [str(a) for a in ana["To"].addresses] == ["ana <ana@example.org>"]
    assert [g.display_name for g in ana["Cc"].groups] == ["bob"] and not ana["Cc"].addresses
    assert [str(a) for a in bob["Cc"].addresses] == ["bob <bob@example.org>"]
    # Its own reply token each, in Reply-To and References, bound to the person.
    tokens = {}
    for who, msg in (("ana", ana), ("bob", bob)):
        [token] = email_tokens.tokens_in_references(msg["References"])
        assert msg["Reply-To"] == email_tokens.reply_address(MAIL_FROM, token)
        tokens[who] = token
    assert tokens["ana"] != tokens["bob"]
    async with gateway_of(api).read() as s:
        row = await email_tokens.find(s, tokens["ana"])
        assert row is not None and row.kind == "reply" and row.used_at is None
        assert (row.session_id, row.mail_id, row.message_id) == (thread["sid"], mail["id"], mid)
        left = row.expires_at - utcnow()
        assert timedelta(days=13, hours=23) < left <= timedelta(days=14)
        rows = list(
            await s.scalars(select(EmailOutboxRow).where(EmailOutboxRow.mail_id == mail["id"]))
        )
    assert sorted((r.kind, r.to_addr, r.session_id, r.message_id) for r in rows) == [
        ("mail", "ana@example.org", thread["sid"], mid),
        ("mail", "bob@example.org", thread["sid"], mid),
    ]
    # Body: the text as written, the HTML by the web UI's Markdown rules.
    plain = ana.get_body(("plain",))
    rich = ana.get_body(("html",))
    assert plain is not None and rich is not None
    text, html = plain.get_content(), rich.get_content()
    assert "Fixed: see **the diff**." in text and "\nFrom now on it works." in text
    assert "<strong>the diff</strong>" in html and "<script>" not in html
    assert b"\nFrom " not in got["ana@example.org"].data  # mbox-safe as mailed
    # The small file as a MIME part, byte for byte; the big one as a link.
    parts = [(p.get_filename(), p.get_content()) for p in ana.iter_attachments()]
    assert parts == [("notes.bin", SMALL)]
    assert f"big.bin (5000 bytes): https://agentmail.example.org/attachments/{big}" in text
    assert f'href="https://agentmail.example.org/attachments/{big}"' in html
    assert f"https://agentmail.example.org/sessions/{thread['sid']}" in text


async def test_the_policy_switch_decides_and_a_persons_own_mail_is_not_mailed(
    people: Api, relay: Relay, thread: dict[str, Any]
) -> None:
    api = people
    r = await api.http.put(
        "/api/v1/me/notify-policy", json={"email_mail": False}, headers=api.auth("ana")
    )
    assert r.status_code == 200 and r.json()["email_mail"] is False, r.text
    assert r.json()["email"] is True  # request e-mails stay on
    mail = await reply(api, thread["first"], cc=["bob@/srv/shop"])
    [got] = await relay.wait_async(1)
    assert got.rcpt_tos == ["bob@example.org"]  # ana's switch is off, bob's on
    # A person's mail (ana's, to the agent and bob) is mailed to nobody.
    relay.messages.clear()
    r = await api.send(
        "ana", ["agent-a@/srv/shop"], cc=["bob@/srv/shop"], parent_mail_id=mail["id"]
    )
    assert r.status_code == 201, r.text
    sender = gateway_of(api).email
    assert sender is not None
    await sender.send_pass()
    async with gateway_of(api).read() as s:
        queued = list(await s.scalars(select(EmailOutboxRow.mail_id).where(
            EmailOutboxRow.kind == "mail")))  # fmt: skip
    assert queued == [mail["id"]] and relay.messages == []


async def test_references_name_the_ancestors_oldest_first(
    people: Api, relay: Relay, thread: dict[str, Any]
) -> None:
    """Three mails deep: References is the root, then each ancestor in order."""
    api = people
    one = await reply(api, thread["first"])
    r = await api.send("ana", ["agent-a@/srv/shop"], parent_mail_id=one["id"], subject="Re")
    assert r.status_code == 201, r.text
    two = r.json()
    three = await reply(api, two["id"])
    got = [m for m in await relay.wait_async(2) if m.message["Message-ID"].startswith(
        f"<mail.{three['id']}@")]  # fmt: skip
    [msg] = [m.message for m in got]
    domain = MAIL_FROM.split("@")[1]
    refs = msg["References"].split()
    assert refs[:-1] == [
        f"<session.{thread['sid']}@{domain}>",
        f"<mail.{thread['first']}@{domain}>",
        f"<mail.{one['id']}@{domain}>",
        f"<mail.{two['id']}@{domain}>",
    ]
    assert msg["In-Reply-To"] == f"<mail.{two['id']}@{domain}>"


async def test_a_reply_to_the_e_mail_goes_on_in_the_session(
    people: Api, relay: Relay, thread: dict[str, Any]
) -> None:
    """The round trip with the inbound side (services/email_inbound.py): the
    e-mail as the relay delivered it, answered as a mail client does, becomes
    ana's mail in the session, a reply to the agent's; bob's token is not ana's."""
    api = people
    mail = await reply(api, thread["first"], cc=["bob@/srv/shop"])
    got = by_rcpt(await relay.wait_async(2))
    original = got["ana@example.org"].message
    done = await email_inbound.receive(
        gateway_of(api), replies.reply(original, "Port 5433, thanks."), via="smtp"
    )
    assert done.outcome == "posted", done
    r = await api.http.get(f"/api/v1/mail/{mail['id']}/thread", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    [mine] = [m for m in r.json()["items"] if m["parent_mail_id"] == mail["id"]]
    assert mine["from"].split("@")[0] == "ana" and mine["body"] == "Port 5433, thanks."
    # bob's copy answered from ana's address: another person's token, nothing posted.
    wrong = await email_inbound.receive(
        gateway_of(api),
        replies.reply(got["bob@example.org"].message, "approve", sender="ana@example.org"),
        via="smtp",
    )
    assert wrong.outcome == "refused", wrong
