"""Replies by e-mail, part two (docs/email.md, "Replies"): DKIM when it is
required (signed with dkimpy and keys of the test's own, published through a
resolver stub), a reply to an agent's mail that goes on in the session, and
mail to `<agent>+<alias>@…` handed to services/email_work.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from mailui4agents.db.reach_tables import EmailInboundRow
from mailui4agents.db.tables import MailRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.email_parts import InboundFile
from mailui4agents.domain.results import Sent
from mailui4agents.services import email_tokens, email_work, sending
from mailui4agents.services import mail as mail_service
from mailui4agents.services.email_inbound import Received
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import MailOut
from tests.email.conftest import MAIL_FROM, gateway_of
from tests.email.replies import (
    Resolver,
    Stopped,
    all_past_the_look_up,
    ask,
    mails_to,
    once_then_stop,
    reply,
    request_of,
    signer,
)
from tests.email.test_replies import ANA, receive, request_mail, team, text_of
from tests.fakes.smtp_relay import Relay

pytestmark = pytest.mark.anyio
__all__ = ["team"]  # the fixture, shared

DKIM = [{"require_dkim": True}]


@pytest.fixture
def dns(team: dict[str, Any]) -> Resolver:
    resolver = Resolver()
    gateway_of(team["api"]).dkim_dns = resolver
    return resolver


@pytest.mark.parametrize("settings", DKIM, indirect=True)
async def test_with_dkim_required_a_signed_reply_decides(
    team: dict[str, Any], relay: Relay, dns: Resolver
) -> None:
    api = team["api"]
    ana_key = signer("example.org")
    dns.publish(ana_key)
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    got = await receive(api, ana_key.sign(reply(original, "deny use the staging db")))
    assert got.outcome == "decided", got
    assert dns.asked == ["s1._domainkey.example.org"]
    assert (await request_of(api, rid))["note"] == "use the staging db"


@pytest.mark.parametrize("settings", DKIM, indirect=True)
async def test_with_dkim_required_forged_and_unsigned_replies_are_refused(
    team: dict[str, Any], relay: Relay, dns: Resolver
) -> None:
    api = team["api"]
    ana_key, other_key, evil_key = (
        signer("example.org"),
        signer("example.org"),
        signer("evil.example"),
    )
    dns.publish(ana_key)
    dns.publish(evil_key)
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    signed = ana_key.sign(reply(original, "deny not now"))
    head, _, body = ana_key.sign(reply(original, "deny")).partition(b"\r\n\r\n")
    forged = {
        "unsigned": reply(original, "approve"),
        # The body changed after signing: the first line says approve now.
        "body_changed": head + b"\r\n\r\napprove\r\n" + body,
        # Signed by a key example.org does not publish (same selector).
        "another_key": other_key.sign(reply(original, "approve")),
        # A valid signature, of another domain than the From's.
        "another_domain": evil_key.sign(reply(original, "approve")),
    }
    for why, raw in forged.items():
        got = await receive(api, raw)
        assert (got.outcome, got.reason) == ("refused", "dkim_failed"), (why, got)
    assert (await request_of(api, rid))["status"] == "pending"
    # The genuine one still decides afterwards: nothing above used the token.
    assert (await receive(api, signed)).outcome == "decided"


async def agent_mail(api: Any, team: dict[str, Any], relay: Relay) -> str:
    """An agent's mail to ana. Its own e-mail to ana (services/email_agent_mail.py)
    is waited for and taken out of the relay: the tests count what comes after."""
    r = await api.send(
        "agent-a",
        [team["ana_address"]],
        subject="Re: fix the login",
        body="Which port?",
        parent_mail_id=team["first"],
    )
    assert r.status_code == 201, r.text
    mid: str = r.json()["id"]

    def its_own() -> list[Any]:
        return [m for m in relay.messages if m.message["Message-ID"] == f"<mail.{mid}@gw.test>"]

    while not its_own():
        await relay.wait_async(len(relay.messages) + 1)
    for m in its_own():
        relay.messages.remove(m)
    return mid


async def mail_token(gw: Gateway, sid: str, mail_id: str, *, days: float = 1) -> str:
    """A reply token as an agent's mail e-mailed to ana would carry."""
    from sqlalchemy import select

    from mailui4agents.db.reach_tables import EmailAddressRow

    async with gw.write() as s:
        address_id, user_id = (
            await s.execute(
                select(EmailAddressRow.id, EmailAddressRow.user_id).where(
                    EmailAddressRow.address == ANA
                )
            )
        ).one()
        return await email_tokens.issue(
            s,
            kind="reply",
            user_id=user_id,
            address_id=address_id,
            session_id=sid,
            mail_id=mail_id,
            expires_at=utcnow() + timedelta(days=days),
        )


def agent_email(token: str, subject: str = "[shop.x] Re: fix the login") -> EmailMessage:
    """The e-mail an agent's mail became (built by another part of the gateway)."""
    msg = EmailMessage()
    msg["From"] = MAIL_FROM
    msg["To"] = ANA
    msg["Subject"] = subject
    msg["Date"] = "Mon, 30 Nov 2026 10:02:00 +0000"
    msg["Message-ID"] = "<mail.1@gw.test>"
    msg["References"] = f"<session.1@gw.test> {email_tokens.reference(MAIL_FROM, token)}"
    msg["Reply-To"] = email_tokens.reply_address(MAIL_FROM, token)
    msg.set_content("Which port?\n")
    return msg


async def test_a_reply_to_an_agents_mail_goes_on_in_the_session(
    team: dict[str, Any], relay: Relay
) -> None:
    api, sid = team["api"], team["sid"]
    parent = await agent_mail(api, team, relay)
    token = await mail_token(gateway_of(api), sid, parent)
    data = bytes(range(256)) * 8
    raw = reply(agent_email(token), "Port 5433.\n\n-- \nAna",
                files=[("dump.bin", "application/octet-stream", data)])  # fmt: skip
    got = await receive(api, raw)
    assert got.outcome == "posted", got
    r = await api.http.get(f"/api/v1/mail/{parent}/thread", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    mine = [m for m in r.json()["items"] if m["from_human"] and m["parent_mail_id"] == parent]
    assert len(mine) == 1, r.json()
    mail = mine[0]
    assert [t.split("@")[0] for t in mail["to"]] == ["agent-a"]
    # The subject without the client's "Re:", the body without quote and signature.
    assert (mail["subject"], mail["body"]) == ("[shop.x] Re: fix the login", "Port 5433.")
    [att] = mail["attachments"]
    assert att["name"] == "dump.bin"
    down = await api.http.get(
        f"/api/v1/agent/attachments/{att['attachment_id']}",
        params={"session_id": sid},
        headers=api.auth("agent-a"),
    )
    assert down.status_code == 200 and down.content == data
    # A mail's reply token is not used up: the conversation goes on.
    again = await receive(api, reply(agent_email(token), "And the user is app."))
    assert again.outcome == "posted", again


async def test_an_expired_mail_token_posts_nothing(team: dict[str, Any], relay: Relay) -> None:
    api, sid = team["api"], team["sid"]
    parent = await agent_mail(api, team, relay)
    token = await mail_token(gateway_of(api), sid, parent, days=-1)
    got = await receive(api, reply(agent_email(token), "Port 5433."))
    assert (got.outcome, got.reason) == ("refused", "expired"), got
    r = await api.http.get(f"/api/v1/mail/{parent}/thread", headers=api.auth("ana"))
    assert not [m for m in r.json()["items"] if m["parent_mail_id"] == parent]
    [answer] = await mails_to(relay, ANA, 1)
    assert "expired" in text_of(answer)


def work_mail(to: str = "agent-a+shop@gw.test") -> bytes:
    msg = EmailMessage()
    msg["From"] = f"Ana <{ANA}>"
    msg["To"] = to
    msg["Subject"] = "[plan] fix the login"
    msg["Message-ID"] = "<work.1@example.org>"
    msg.set_content("The login page 500s.\n\n-- \nAna\n")
    return bytes(msg)


async def test_new_work_by_e_mail_goes_to_email_work(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = team["api"]
    seen: list[dict[str, Any]] = []

    async def start(
        gw: Gateway, person: Principal, *, agent: str, alias: str, subject: str, body: str,
        files: Sequence[InboundFile] = (), email_message_id: str | None = None,
        also: sending.Also | None = None,
    ) -> email_work.Started:  # fmt: skip
        seen.append({"person": person.name, "agent": agent, "alias": alias, "subject": subject,
                     "body": body, "id": email_message_id})  # fmt: skip
        if alias != "shop":
            raise email_work.NoSuchPlace("no workspace 'nope'; there are: shop")
        assert also is not None  # the e-mail's row is written in the send's transaction
        out = MailOut.model_validate({"id": "m1", "session_id": team["sid"], "type": "message",
                                      "from": "ana", "to": ["agent-a"], "subject": subject,
                                      "created_at": utcnow()})  # fmt: skip
        async with gw.write() as s:
            await also(s, Sent(out.model_dump(mode="json", by_alias=True)))
        return email_work.Started(team["sid"], "m1")

    monkeypatch.setattr(email_work, "start", start)
    got = await receive(api, work_mail())
    assert got.outcome == "started", got
    assert seen == [{"person": "ana", "agent": "agent-a", "alias": "shop",
                     "subject": "[plan] fix the login", "body": "The login page 500s.",
                     "id": "<work.1@example.org>"}]  # fmt: skip
    refused = await receive(api, work_mail("agent-a+nope@gw.test").replace(b"work.1", b"work.2"))
    assert (refused.outcome, refused.reason) == ("refused", "no_such_place"), refused
    [answer] = await mails_to(relay, ANA, 1)
    assert "there are: shop" in text_of(answer)
    # From an unknown sender: not even handed on.
    stranger = work_mail().replace(ANA.encode(), b"eve@evil.example").replace(b"work.1", b"w3")
    assert (await receive(api, stranger)).reason == "unknown_sender"
    assert len(seen) == 2


async def test_new_work_by_e_mail_starts_a_session_in_the_aliased_workspace(
    team: dict[str, Any], relay: Relay
) -> None:
    """The real email_work.start behind receive(): no alias yet → refused and
    answered with what exists; the admin names `shop` → the same mail (a new
    Message-ID) starts a plan-mode session there, as ana."""
    api = team["api"]
    got = await receive(api, work_mail())
    assert (got.outcome, got.reason) == ("refused", "no_such_place"), got
    [answer] = await mails_to(relay, ANA, 1)
    assert "Nothing was started" in text_of(answer) or "shop" in text_of(answer)
    r = await api.http.put(
        "/api/v1/admin/workspace-aliases/shop",
        json={"workspace": "/srv/shop"},
        headers=api.auth("admin"),
    )
    assert r.status_code == 201, r.text
    started = await receive(api, work_mail().replace(b"work.1", b"work.2"))
    assert started.outcome == "started", started
    async with gateway_of(api).read() as s:
        row = (
            await s.execute(
                select(EmailInboundRow).where(EmailInboundRow.dedupe_key == "<work.2@example.org>")
            )
        ).scalar_one()
    assert row.session_id is not None
    r = await api.http.get(f"/api/v1/sessions/{row.session_id}", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    assert (r.json()["workspace"], r.json()["permission_mode"]) == ("/srv/shop", "plan"), r.json()


@pytest.mark.parametrize("settings", [{"attachment_max_bytes": 1024}], indirect=True)
async def test_an_attachment_over_the_limit_posts_nothing(
    team: dict[str, Any], relay: Relay
) -> None:
    api, sid = team["api"], team["sid"]
    parent = await agent_mail(api, team, relay)
    token = await mail_token(gateway_of(api), sid, parent)
    raw = reply(agent_email(token), "Here it is.",
                files=[("big.bin", "application/octet-stream", b"x" * 2048)])  # fmt: skip
    got = await receive(api, raw)
    assert (got.outcome, got.reason) == ("refused", "not_posted"), got
    r = await api.http.get(f"/api/v1/mail/{parent}/thread", headers=api.auth("ana"))
    assert not [m for m in r.json()["items"] if m["parent_mail_id"] == parent]
    [answer] = await mails_to(relay, ANA, 1)
    assert "Your reply was not sent" in text_of(answer) and "1024" in text_of(answer)


# --- exactly once: the posted mail and the row commit together ------------------------------


async def replies_in_thread(api: Any, parent: str) -> list[dict[str, Any]]:
    r = await api.http.get(f"/api/v1/mail/{parent}/thread", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    return [m for m in r.json()["items"] if m["from_human"] and m["parent_mail_id"] == parent]


async def test_a_gateway_stopping_before_the_send_commits_leaves_the_reply_to_be_posted_again(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mail is stored in the send's transaction, then the gateway stops
    before it commits: neither the mail nor the row stays, and the message
    fetched again is posted, once."""
    api, sid = team["api"], team["sid"]
    parent = await agent_mail(api, team, relay)
    token = await mail_token(gateway_of(api), sid, parent)
    raw = reply(agent_email(token), "Port 5433.")
    monkeypatch.setattr(mail_service, "send_mail", once_then_stop(mail_service.send_mail))
    with pytest.raises(Stopped):
        await receive(api, raw)
    assert await replies_in_thread(api, parent) == []
    async with gateway_of(api).read() as s:
        assert (await s.scalars(select(EmailInboundRow))).all() == []
    got = await receive(api, raw)
    assert got.outcome == "posted", got
    assert await receive(api, raw) == Received("duplicate")
    [posted] = await replies_in_thread(api, parent)
    assert posted["body"] == "Port 5433."
    async with gateway_of(api).read() as s:
        [row] = (await s.scalars(select(EmailInboundRow))).all()
    assert (row.outcome, row.mail_id, row.session_id) == ("posted", posted["id"], sid)


async def test_two_copies_of_a_reply_past_the_look_up_at_once_post_one_mail(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, sid = team["api"], team["sid"]
    parent = await agent_mail(api, team, relay)
    token = await mail_token(gateway_of(api), sid, parent)
    raw = reply(agent_email(token), "Port 5433.")
    all_past_the_look_up(monkeypatch)
    got: list[Received] = []

    async def one() -> None:
        got.append(await receive(api, raw))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    assert sorted(g.outcome for g in got) == ["duplicate", "posted"], got
    [posted] = await replies_in_thread(api, parent)
    async with gateway_of(api).read() as s:
        [row] = (await s.scalars(select(EmailInboundRow))).all()
    assert (row.outcome, row.mail_id) == ("posted", posted["id"])
    async with gateway_of(api).read() as s:  # in the session: the reply once, not twice
        bodies = (await s.scalars(select(MailRow.body).where(MailRow.session_id == sid))).all()
    assert list(bodies).count("Port 5433.") == 1, bodies


async def test_two_copies_of_a_work_mail_past_the_look_up_at_once_start_one_session(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = team["api"]
    r = await api.http.put(
        "/api/v1/admin/workspace-aliases/shop",
        json={"workspace": "/srv/shop"},
        headers=api.auth("admin"),
    )
    assert r.status_code == 201, r.text
    async with gateway_of(api).read() as s:
        before = set((await s.scalars(select(SessionRow.id))).all())
    all_past_the_look_up(monkeypatch)
    got: list[Received] = []

    async def one() -> None:
        got.append(await receive(api, work_mail()))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    assert sorted(g.outcome for g in got) == ["duplicate", "started"], got
    async with gateway_of(api).read() as s:
        new = set((await s.scalars(select(SessionRow.id))).all()) - before
        [row] = (await s.scalars(select(EmailInboundRow))).all()
    assert [row.session_id] == list(new), (row.session_id, new)  # one session, not two
