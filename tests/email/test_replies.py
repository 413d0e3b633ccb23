"""Replies by e-mail (docs/email.md, "Replies"): services/email_inbound.receive
given real RFC 5322 bytes, built as a mail client builds a reply to the request
e-mail the gateway sent through the recording relay, against an in-process
gateway. What decides, and every refusal with nothing decided."""

from __future__ import annotations

import logging
from email.message import EmailMessage
from typing import Any

import anyio
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from mailui4agents.db.audit_tables import AuditRow
from mailui4agents.db.reach_tables import EmailInboundRow, EmailOutboxRow, EmailTokenRow
from mailui4agents.db.tables import SessionRow, UserRow
from mailui4agents.services import email_inbound, email_tokens, permission_decisions
from mailui4agents.services.email_inbound import Received
from tests.conftest import Api
from tests.email.conftest import MAIL_FROM, gateway_of
from tests.email.replies import (
    Stopped,
    all_past_the_look_up,
    ask,
    mails_to,
    once_then_stop,
    reply,
    request_of,
    verify,
)
from tests.fakes.smtp_relay import Relay

pytestmark = pytest.mark.anyio

ANA, BOB, CAROL = "ana@example.org", "bob@example.org", "carol@example.org"


@pytest.fixture
async def team(people: Api, relay: Relay) -> dict[str, Any]:
    """ana (verified) owns a session of agent-a; bob (verified) decides too;
    carol's address is added but not verified."""
    api = people
    await api.user("carol")
    await verify(api, relay, "ana", ANA)
    await verify(api, relay, "bob", BOB)
    r = await api.http.post("/api/v1/me/emails", json={"address": CAROL}, headers=api.auth("carol"))
    assert r.status_code == 201, r.text
    r = await api.send("ana", ["agent-a@/srv/shop.new"], subject="fix the login")
    assert r.status_code == 201, r.text
    r0 = r.json()
    sid, first = r0["session_id"], r0["id"]
    r = await api.http.post(
        f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
    )
    assert r.status_code in (200, 201), r.text
    await mails_to(relay, CAROL, 1)
    relay.messages.clear()
    return {"sid": sid, "api": api, "first": first, "ana_address": r0["from"]}


async def request_mail(relay: Relay, to: str, rid: str, n: int = 1) -> EmailMessage:
    """The request e-mail of `rid` to `to` (the n-th request e-mail to them)."""
    got = [m for m in await mails_to(relay, to, n) if m.message["Subject"]]
    return got[n - 1].message


def text_of(got: Any) -> str:
    body = got.message.get_body(("plain",))
    return "" if body is None else str(body.get_content())


async def receive(api: Api, raw: bytes, **kw: Any) -> Received:
    return await email_inbound.receive(gateway_of(api), raw, via="smtp", **kw)


async def answers_to(api: Api, username: str) -> int:
    async with gateway_of(api).read() as s:
        user_id = await s.scalar(select(UserRow.id).where(UserRow.username == username))
        n = await s.scalar(
            select(func.count())
            .select_from(EmailOutboxRow)
            .where(EmailOutboxRow.user_id == user_id, EmailOutboxRow.kind == "answer")
        )
    return int(n or 0)


async def refusals(api: Api, rid: str) -> list[str]:
    r = await api.http.get(f"/api/v1/permissions/{rid}/deliveries", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    return [d["detail"] for d in r.json() if d["channel"] == "email" and d["state"] == "refused"]


async def pending(api: Api, rid: str) -> None:
    got = await request_of(api, rid)
    assert got["status"] == "pending", got


# --- what decides --------------------------------------------------------------------------


async def test_deny_with_a_note_decides_by_e_mail(
    team: dict[str, Any], relay: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    caplog.set_level(logging.INFO, "mailui4agents.email")
    got = await receive(api, reply(original, "deny use the staging db"))
    assert got == Received("decided", None, "denied: use the staging db"), got
    req = await request_of(api, rid)
    assert (req["status"], req["note"], req["decided_by"]) == (
        "denied",
        "use the staging db",
        "ana",
    )
    assert req["decided_via"] == {"channel": "email", "device": ANA}
    r = await api.http.get(f"/api/v1/permissions/{rid}/deliveries", headers=api.auth("ana"))
    decided = [d for d in r.json() if d["state"] == "decided"]
    assert [(d["channel"], d["device"]) for d in decided] == [("email", ANA)]
    stats = await api.http.get("/api/v1/email/stats", headers=api.auth("admin"))
    assert stats.json()["inbound"] == {"decided": 1}, stats.json()
    assert any("decided" in m and ANA in m for m in caplog.messages), caplog.messages
    async with gateway_of(api).read() as s:
        row = (await s.scalars(select(EmailInboundRow))).one()
        audited = (await s.scalars(select(AuditRow))).one()  # docs/audit.md
    assert (row.outcome, row.request_id, row.via) == ("decided", rid, "smtp")
    assert (audited.request_id, audited.outcome, audited.actor_kind, audited.actor) == (
        rid, "denied", "person", "ana",
    )  # fmt: skip
    assert (audited.channel, audited.device, audited.reason) == ("email", ANA, "use the staging db")


async def test_approve_approves_and_the_token_then_works_no_more(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    first = reply(original, "Approve.")
    assert (await receive(api, first)).outcome == "decided"
    assert (await request_of(api, rid))["status"] == "approved"
    # The same message again (an IMAP re-fetch, or a copy that came another way
    # and gained a Received line): nothing at all.
    assert await receive(api, first) == Received("duplicate")
    assert await receive(api, b"Received: from mx2.example.org\r\n" + first) == Received(
        "duplicate"
    )
    async with gateway_of(api).read() as s:
        used = (await s.scalars(select(EmailTokenRow.used_at).where(
            EmailTokenRow.request_id == rid, EmailTokenRow.kind == "reply"))).all()  # fmt: skip
    assert sorted(u is not None for u in used) == [False, True]  # ana's copy used, bob's not
    # A second reply with the same token: refused, answered, nothing changes.
    second = await receive(api, reply(original, "deny changed my mind"))
    assert (second.outcome, second.reason) == ("refused", "already_decided"), second
    req = await request_of(api, rid)
    assert (req["status"], req["note"]) == ("approved", None)
    [answer] = [m for m in await mails_to(relay, ANA, 2) if "Nothing changed" in text_of(m)]
    said = text_of(answer)
    assert f"already decided by ana from {ANA}" in said and "(channel: email)" in said, said
    assert any("already_decided" in d for d in await refusals(api, rid))


async def test_always_approves_with_a_standing_grant(team: dict[str, Any], relay: Relay) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"], "make deploy")
    original = await request_mail(relay, ANA, rid)
    assert (await receive(api, reply(original, "always"))).outcome == "decided"
    req = await request_of(api, rid)
    assert req["status"] == "approved" and req.get("grant_id"), req
    # The grant decides the same call again at once, as the web UI's "always" does.
    again = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": team["sid"], "relay_key": "k2", "tool_name": "Bash",
              "tool_input": {"command": "make deploy"}},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert again.status_code == 201 and again.json()["status"] == "approved", again.text


async def test_a_question_is_answered_by_an_options_number(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": team["sid"], "relay_key": "q1", "kind": "question",
              "question": "Which database?", "options": [{"label": "Postgres"},
                                                         {"label": "SQLite"}]},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    original = await request_mail(relay, ANA, rid)
    assert (await receive(api, reply(original, "2"))).outcome == "decided"
    req = await request_of(api, rid)
    assert (req["status"], req["answers"]) == ("approved", ["SQLite"]), req


# --- refused, nothing decided --------------------------------------------------------------


async def test_a_reply_from_another_address_is_refused_unanswered(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    got = await receive(api, reply(original, "approve", sender="Eve <eve@evil.example>"))
    assert (got.outcome, got.reason) == ("refused", "unknown_sender"), got
    await pending(api, rid)
    assert await answers_to(api, "ana") == 0  # no backscatter
    [detail] = await refusals(api, rid)
    assert detail.startswith("unknown_sender")


async def test_the_right_from_without_the_token_is_refused(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    bare = reply(original, "approve", to=MAIL_FROM, references=original["In-Reply-To"])
    got = await receive(api, bare)
    assert (got.outcome, got.reason) == ("refused", "no_token"), got
    await pending(api, rid)
    [answer] = [m for m in await mails_to(relay, ANA, 2) if m.message["Auto-Submitted"]
                and m.message["Auto-Submitted"] == "auto-replied"]  # fmt: skip
    assert answer.message["To"] == ANA


async def test_a_token_of_another_request_is_refused(team: dict[str, Any], relay: Relay) -> None:
    api = team["api"]
    first = await ask(api, team["sid"], "make a")
    mail_a = await request_mail(relay, ANA, first)
    second = await ask(api, team["sid"], "make b")
    mail_b = await request_mail(relay, ANA, second, n=2)
    # A reply to A's e-mail, sent to B's reply address: which did she mean?
    got = await receive(api, reply(mail_a, "approve", to=mail_b["Reply-To"]))
    assert (got.outcome, got.reason) == ("refused", "token_mismatch"), got
    await pending(api, first)
    await pending(api, second)


async def test_a_reply_whose_only_approve_is_quoted_decides_nothing(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"], "echo approve")
    original = await request_mail(relay, ANA, rid)
    raw = reply(original, "Thanks, looking at it.\n\n> approve")
    got = await receive(api, raw)
    assert (got.outcome, got.reason) == ("refused", "not_understood"), got
    await pending(api, rid)
    [answer] = [m for m in await mails_to(relay, ANA, 2) if m.message["In-Reply-To"]
                and m.message["Auto-Submitted"] == "auto-replied"]  # fmt: skip
    text = answer.message.get_body(("plain",))
    assert text is not None
    assert "I did not understand: reply approve or deny, with a note after deny" in (
        text.get_content()
    )
    sent = email_message_of(raw)
    assert answer.message["In-Reply-To"] == sent["Message-ID"]
    assert sent["Message-ID"] in answer.message["References"]
    # The token still works: answering the answer (its References carry the
    # token; it has no Reply-To) decides now.
    again = reply(answer.message, "approve")
    assert email_message_of(again)["To"] == MAIL_FROM
    assert (await receive(api, again)).outcome == "decided"
    assert (await request_of(api, rid))["status"] == "approved"


def email_message_of(raw: bytes) -> EmailMessage:
    import email
    import email.policy

    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


async def test_an_unverified_address_is_refused_unanswered(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    got = await receive(api, reply(original, "approve", sender=f"Carol <{CAROL}>"))
    assert (got.outcome, got.reason) == ("refused", "not_verified"), got
    await pending(api, rid)
    assert await answers_to(api, "carol") == 0


async def test_another_persons_token_is_refused(team: dict[str, Any], relay: Relay) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    anas = await request_mail(relay, ANA, rid)
    # bob decides too and his address is verified, but this copy was ana's.
    got = await receive(api, reply(anas, "approve", sender=f"Bob <{BOB}>"))
    assert (got.outcome, got.reason) == ("refused", "wrong_person"), got
    await pending(api, rid)


async def test_auto_replies_never_decide_nor_get_an_answer(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    for i, headers in enumerate(
        ({"Auto-Submitted": "auto-replied"}, {"Precedence": "bulk"}, {"X-Autoreply": "yes"})
    ):
        got = await receive(api, reply(original, f"approve\n{i}", headers=headers))
        assert (got.outcome, got.reason) == ("refused", "auto_reply"), (headers, got)
    await pending(api, rid)
    assert await answers_to(api, "ana") == 0


async def test_two_from_addresses_are_refused(team: dict[str, Any], relay: Relay) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    got = await receive(api, reply(original, "approve", sender=f"{ANA}, eve@evil.example"))
    assert (got.outcome, got.reason) == ("refused", "no_from"), got
    await pending(api, rid)


@pytest.mark.parametrize("settings", [{"email_in_max_bytes": 4096}], indirect=True)
async def test_a_message_over_the_size_limit_is_not_read(
    team: dict[str, Any], relay: Relay
) -> None:
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    raw = reply(original, "approve", files=[("big.bin", "application/octet-stream", b"x" * 4096)])
    got = await receive(api, raw)
    assert (got.outcome, got.reason) == ("refused", "too_big"), got
    await pending(api, rid)
    assert (await receive(api, raw)).outcome == "duplicate"  # keyed by its bytes
    assert gateway_of(api).email_in_counts["refused:too_big"] == 1


async def test_a_malformed_message_is_refused_not_raised(team: dict[str, Any]) -> None:
    api = team["api"]
    for raw in (b"", b"\xff\xfe\x00garbage", b"From: \r\n\r\n", b"Subject: =?bad?=\r\n\r\nx"):
        got = await receive(api, raw)
        assert got.outcome == "refused" and got.reason in ("no_from", "malformed"), (raw, got)


async def test_a_session_alias_is_in_the_subject_of_the_answer(
    team: dict[str, Any], relay: Relay
) -> None:
    """The answer is in the person's thread: Re: their subject."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    await receive(api, reply(original, "maybe"))
    async with gateway_of(api).read() as s:
        session = await s.get(SessionRow, team["sid"])
    assert session is not None
    [answer] = [m for m in await mails_to(relay, ANA, 2) if m.message["Auto-Submitted"]
                == "auto-replied"]  # fmt: skip
    assert answer.message["Subject"] == f"Re: {original['Subject']}"
    assert session.alias and session.alias in answer.message["Subject"]


async def test_replies_racing_decide_once(team: dict[str, Any], relay: Relay) -> None:
    """Two replies with one token and a second copy of one of them, at once: one
    decides, the copy is a duplicate, the other reply is refused."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    approve, deny = reply(original, "approve"), reply(original, "deny no")
    got: dict[int, Received] = {}

    async def one(i: int, raw: bytes) -> None:
        got[i] = await receive(api, raw)

    async with anyio.create_task_group() as tg:
        for i, raw in enumerate((approve, deny, approve)):
            tg.start_soon(one, i, raw)
    outcomes = sorted(g.outcome for g in got.values())
    assert outcomes == ["decided", "duplicate", "refused"], got
    [refused] = [g for g in got.values() if g.outcome == "refused"]
    assert refused.reason in ("already_decided", "already_used"), refused
    status = (await request_of(api, rid))["status"]
    winner = "approved" if got[1].outcome != "decided" else "denied"
    assert status == winner, (status, got)


async def test_a_used_token_decides_nothing_even_while_pending(
    team: dict[str, Any], relay: Relay
) -> None:
    """The token is the credential: once used (here by hand, as a decision that
    used it would), no reply with it decides, whatever the request's state."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    async with gateway_of(api).write() as s:
        row = (
            await s.scalars(
                select(EmailTokenRow)
                .join(UserRow, UserRow.id == EmailTokenRow.user_id)
                .where(
                    EmailTokenRow.request_id == rid,
                    EmailTokenRow.kind == "reply",
                    UserRow.username == "ana",
                )
            )
        ).first()
        assert row is not None
        assert await email_tokens.use(s, row)
    got = await receive(api, reply(original, "approve"))
    assert (got.outcome, got.reason) == ("refused", "already_used"), got
    await pending(api, rid)


# --- exactly once: the row commits with what it records ------------------------------------


async def inbound_rows(api: Api) -> list[EmailInboundRow]:
    async with gateway_of(api).read() as s:
        return list((await s.scalars(select(EmailInboundRow))).all())


async def test_a_gateway_stopping_before_the_commit_leaves_the_reply_to_be_decided_again(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision is made, then the gateway stops before its transaction
    commits: nothing of it stays (no row, the token unused, the request pending),
    so the message fetched again decides, once."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    raw = reply(original, "deny use the staging db")
    monkeypatch.setattr(permission_decisions, "decide", once_then_stop(permission_decisions.decide))
    with pytest.raises(Stopped):
        await receive(api, raw)
    await pending(api, rid)
    assert await inbound_rows(api) == []
    async with gateway_of(api).read() as s:
        used = await s.scalar(
            select(func.count()).select_from(EmailTokenRow).where(
                EmailTokenRow.request_id == rid, EmailTokenRow.used_at.is_not(None))
        )  # fmt: skip
    assert used == 0
    assert await receive(api, raw) == Received("decided", None, "denied: use the staging db")
    assert await receive(api, raw) == Received("duplicate")
    assert (await request_of(api, rid))["status"] == "denied"
    assert [(r.outcome, r.request_id) for r in await inbound_rows(api)] == [("decided", rid)]


async def test_a_database_failure_leaves_the_reply_to_be_tried_again(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database failing while a reply is acted on (a dropped connection, a
    lock timeout) is not a refusal: receive() raises, nothing is committed, and
    the transport's next try decides."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    raw = reply(original, "approve")
    real = permission_decisions.decide
    calls = 0

    async def failing_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OperationalError("UPDATE permissions …", {}, Exception("server closed"))
        return await real(*args, **kwargs)

    monkeypatch.setattr(permission_decisions, "decide", failing_once)
    with pytest.raises(OperationalError):
        await receive(api, raw)
    await pending(api, rid)
    assert await inbound_rows(api) == []
    assert gateway_of(api).email_in_counts["retry:database"] == 1
    assert (await receive(api, raw)).outcome == "decided"
    assert (await request_of(api, rid))["status"] == "approved"


async def test_two_copies_past_the_look_up_at_once_decide_once(
    team: dict[str, Any], relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both copies find no row before acting; the second one's row collides on
    the key inside its own transaction, which rolls back: `duplicate`, and its
    refusal ("already decided") neither recorded nor answered."""
    api = team["api"]
    rid = await ask(api, team["sid"])
    original = await request_mail(relay, ANA, rid)
    raw = reply(original, "approve")
    all_past_the_look_up(monkeypatch)
    got: list[Received] = []

    async def one() -> None:
        got.append(await receive(api, raw))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    assert sorted(g.outcome for g in got) == ["decided", "duplicate"], got
    assert (await request_of(api, rid))["status"] == "approved"
    assert [(r.outcome, r.request_id) for r in await inbound_rows(api)] == [("decided", rid)]
    assert await refusals(api, rid) == []
    assert await answers_to(api, "ana") == 0
    counts = gateway_of(api).email_in_counts
    assert (counts["decided"], counts["duplicate"], counts["refused"]) == (1, 1, 0), counts
