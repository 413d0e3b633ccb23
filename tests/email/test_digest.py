"""The daily digest by e-mail (docs/email.md, "Daily digest"), through a real
SMTP relay: with a digest hour in the person's time zone, one e-mail a day
listing the requests pending for them and the mails they have not read; none
before the hour, none a second time that day (also with two passes racing),
none with nothing to say, none with the digest off. Time is the `now` handed
to the pass (services/scheduler.send_digests)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select

from mailui4agents.db.reach_tables import EmailOutboxRow
from mailui4agents.db.tables import SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import email_digest, scheduler
from mailui4agents.state import Gateway
from tests.conftest import Api
from tests.email.conftest import gateway_of, link_token
from tests.fakes.smtp_relay import Received, Relay

pytestmark = pytest.mark.anyio

POLICY = "/api/v1/me/notify-policy"
PUBLIC = {"public_url": "https://agentmail.example.org"}
ZONE = "Europe/Madrid"
HOUR = 10


def local_at(after: datetime, hour: int, minute: int) -> datetime:
    """The first instant after `after` that is hour:minute on ZONE's clock."""
    local = after.astimezone(ZoneInfo(ZONE))
    at = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if at <= local:
        at = (local + timedelta(days=1)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return at


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


async def set_digest(api: Api, who: str, hour: int | None) -> None:
    r = await api.http.put(
        POLICY,
        # Request e-mails and agents' mails off: the digest is a switch of its own,
        # and the relay then holds digests only.
        json={"email_digest_hour": hour, "timezone": ZONE, "email": False, "email_mail": False},
        headers=api.auth(who),
    )
    assert r.status_code == 200, r.text
    assert r.json()["email_digest_hour"] == hour


async def ask(api: Api, sid: str) -> str:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": uuid.uuid4().hex, "tool_name": "Bash",
              "tool_input": {"command": "make deploy"}},
        headers=api.auth("agent-a"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    rid: str = r.json()["id"]
    return rid


@pytest.fixture
async def team(people: Api, relay: Relay) -> dict[str, Any]:
    """ana (verified address) started a session with agent-a; bob is verified too
    and has nothing waiting. The relay is empty after it."""
    api = people
    await verify(api, relay, "ana", "ana@example.org")
    await verify(api, relay, "bob", "bob@example.org")
    r = await api.send("ana", ["agent-a@/srv/shop.new"], subject="fix the login")
    assert r.status_code == 201, r.text
    first = r.json()
    async with gateway_of(api).read() as s:
        session = await s.get(SessionRow, first["session_id"])
    assert session is not None and session.alias
    return {"sid": first["session_id"], "first": first["id"], "tag": f"[shop.{session.alias}]",
            "start": utcnow()}  # fmt: skip


async def something_to_say(api: Api, team: dict[str, Any]) -> str:
    """A request pending for ana and a mail to her she has not read; its id."""
    rid = await ask(api, team["sid"])
    r = await api.send(
        "agent-a", ["ana@/srv/shop"], subject="Re: fix the login", body="done",
        parent_mail_id=team["first"],
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return rid


async def digests(gw: Gateway) -> int:
    async with gw.read() as s:
        n = await s.scalar(
            select(func.count()).select_from(EmailOutboxRow).where(EmailOutboxRow.kind == "digest")
        )
    return int(n or 0)


async def received_digests(relay: Relay, n: int) -> list[Received]:
    """The relay's `n` messages, each a digest (set_digest turned the other e-mails off)."""
    got = await relay.wait_async(n)
    assert all(str(m.message["Subject"]).startswith("[agentmail] digest") for m in got)
    return got


@pytest.mark.parametrize("settings", [PUBLIC], indirect=True)
async def test_one_digest_after_the_hour_lists_what_waits_and_only_once_a_day(
    people: Api, relay: Relay, team: dict[str, Any]
) -> None:
    api, gw = people, gateway_of(people)
    await set_digest(api, "ana", HOUR)
    rid = await something_to_say(api, team)
    before = local_at(team["start"], HOUR - 1, 30)
    assert (await scheduler.send_digests(gw, before)).claimed == 0
    assert await digests(gw) == 0  # before the hour: nothing

    at = before + timedelta(hours=1)  # 10:30 on ana's clock
    done = await scheduler.send_digests(gw, at)
    assert (done.claimed, done.queued) == (1, 1)  # ana; bob has no digest hour
    [got] = await received_digests(relay, 1)
    assert got.rcpt_tos == ["ana@example.org"]
    msg = got.message
    day = at.astimezone(ZoneInfo(ZONE)).date().isoformat()
    assert str(msg["Subject"]) == f"[agentmail] digest {day}: 1 waiting, 1 unread"
    assert msg["Auto-Submitted"] == "auto-generated"
    plain, rich = msg.get_body(("plain",)), msg.get_body(("html",))
    assert plain is not None and rich is not None
    text, html = plain.get_content(), rich.get_content()
    assert "Requests waiting for you: 1" in text
    assert f"{team['tag']} Bash from agent-a" in text
    assert f"Open: https://agentmail.example.org/approvals#req-{rid}" in text
    assert "Mails you have not read: 1" in text
    assert f"{team['tag']} from agent-a: Re: fix the login" in text
    assert f'href="https://agentmail.example.org/approvals#req-{rid}"' in html
    assert "more" not in text

    # A second pass the same day, and a later one that day: nothing more.
    assert (await scheduler.send_digests(gw, at + timedelta(minutes=1))).claimed == 0
    assert (await scheduler.send_digests(gw, at + timedelta(hours=5))).claimed == 0
    assert await digests(gw) == 1


async def test_two_passes_racing_send_one_digest(
    people: Api, relay: Relay, team: dict[str, Any]
) -> None:
    """Both passes read ana as due before either claims (two replicas at once):
    one claim changes her row, the other nothing."""
    api, gw = people, gateway_of(people)
    await set_digest(api, "ana", HOUR)
    await something_to_say(api, team)
    at = local_at(team["start"], HOUR, 30)
    async with gw.read() as s:
        first = await email_digest.plan(s, at)
    async with gw.read() as s:
        second = await email_digest.plan(s, at)
    assert [d.username for d in first] == [d.username for d in second] == ["ana"]
    sender = gw.email
    assert sender is not None
    won = []
    for due in (*first, *second):
        async with gw.write() as s:
            if await email_digest.claim(s, due):
                won.append(await email_digest.send(s, due, at, sender))
    assert won == [1]
    assert await digests(gw) == 1


async def test_nothing_to_say_or_the_digest_off_sends_nothing(
    people: Api, relay: Relay, team: dict[str, Any]
) -> None:
    api, gw = people, gateway_of(people)
    await set_digest(api, "bob", HOUR)  # bob: nothing pending, nothing unread
    await something_to_say(api, team)  # for ana, whose digest is off
    at = local_at(team["start"], HOUR, 30)
    done = await scheduler.send_digests(gw, at)
    assert (done.claimed, done.queued, done.empty) == (1, 0, 1)
    assert await digests(gw) == 0
    # Negative control: ana's digest turned on then off again stays off.
    await set_digest(api, "ana", HOUR)
    await set_digest(api, "ana", None)
    assert (await scheduler.send_digests(gw, at)).claimed == 0
    assert await digests(gw) == 0
    # ...and on, it is sent.
    await set_digest(api, "ana", HOUR)
    assert (await scheduler.send_digests(gw, at)).queued == 1


async def test_a_long_digest_lists_at_most_max_items_and_counts_the_rest(
    people: Api, relay: Relay, team: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, gw = people, gateway_of(people)
    monkeypatch.setattr(email_digest, "MAX_ITEMS", 2)
    await set_digest(api, "ana", HOUR)
    for _ in range(3):
        await something_to_say(api, team)
    done = await scheduler.send_digests(gw, local_at(team["start"], HOUR, 30))
    assert done.queued == 1
    [got] = await received_digests(relay, 1)
    plain = got.message.get_body(("plain",))
    assert plain is not None
    text = plain.get_content()
    assert "Requests waiting for you: 3" in text and "Mails you have not read: 3" in text
    assert text.count("Bash from agent-a") == 2 and text.count("and 1 more") == 2


async def test_a_gateway_that_sends_no_email_runs_no_digest(
    people: Api, relay: Relay, team: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an e-mail sender (no smtp_url) the pass returns at once: ana, due,
    is not claimed, so once the gateway mails her day's digest still goes out."""
    api, gw = people, gateway_of(people)
    await set_digest(api, "ana", HOUR)
    await something_to_say(api, team)
    at = local_at(team["start"], HOUR, 30)
    sender = gw.email
    monkeypatch.setattr(gw, "email", None)
    assert (await scheduler.send_digests(gw, at)).claimed == 0
    monkeypatch.setattr(gw, "email", sender)
    assert (await scheduler.send_digests(gw, at)).queued == 1
