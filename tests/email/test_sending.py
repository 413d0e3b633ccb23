"""The e-mail sender against a real SMTP relay (docs/email.md, "What each failure
looks like"): 4xx retried with back-off, 5xx failed at once with the relay's
answer, a login checked, STARTTLS required off loopback, and never a second copy
once the message was handed over (a connection lost after DATA, a gateway dead
between the relay's 250 and the commit)."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select, update

from mailui4agents.db.reach_tables import EmailOutboxRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import email_send
from mailui4agents.services.email_send import EmailSender
from mailui4agents.settings import Settings
from tests.conftest import Api, make_settings
from tests.email.conftest import MAIL_FROM, gateway_of
from tests.fakes.smtp_relay import DROP, Relay, smtp_relay
from tests.needs import missing

pytestmark = pytest.mark.anyio


def sender_of(api: Api) -> EmailSender:
    sender = gateway_of(api).email
    assert sender is not None
    return sender


async def add(api: Api, address: str = "ana@example.org") -> str:
    """Add an address for ana; the id of the verification mail's outbox row."""
    r = await api.http.post("/api/v1/me/emails", json={"address": address}, headers=api.auth("ana"))
    assert r.status_code == 201, r.text
    async with gateway_of(api).read() as s:
        row_id = await s.scalar(select(EmailOutboxRow.id).where(EmailOutboxRow.to_addr == address))
    assert row_id is not None
    return row_id


async def row(api: Api, row_id: str) -> EmailOutboxRow:
    async with gateway_of(api).read() as s:
        got = await s.get(EmailOutboxRow, row_id)
    assert got is not None
    return got


async def last_mail(api: Api) -> dict[str, Any]:
    r = await api.http.get("/api/v1/me/emails", headers=api.auth("ana"))
    out: dict[str, Any] = r.json()["items"][0]["last_mail"]
    return out


async def test_a_4xx_is_retried_with_back_off_and_sent_once(people: Api, relay: Relay) -> None:
    api = people
    relay.answer("data", "451 4.3.0 try again later", "421 4.7.0 busy")
    row_id = await add(api)
    assert (await sender_of(api).wait_final([row_id], 10))[row_id] == "sent"
    done = await row(api, row_id)
    assert done.attempts == 3 and done.status_code == 250
    assert len(relay.messages) == 1
    assert [c for c in relay.commands if c.startswith("DATA")] == [
        "DATA: 451 4.3.0 try again later",
        "DATA: 421 4.7.0 busy",
        "DATA: 250 2.0.0 Ok: queued",
    ]
    assert sender_of(api).counts["retried"] == 2 and sender_of(api).counts["sent"] == 1


async def test_a_5xx_fails_at_once_with_the_relays_answer(people: Api, relay: Relay) -> None:
    api = people
    relay.answer("rcpt", "550 5.1.1 <ana@example.org>: no such user")
    row_id = await add(api)
    assert (await sender_of(api).wait_final([row_id], 10))[row_id] == "failed"
    mail = await last_mail(api)
    assert mail["state"] == "failed" and mail["status_code"] == 550
    assert "no such user" in mail["detail"]
    assert relay.messages == [] and (await row(api, row_id)).attempts == 1
    stats = await api.http.get("/api/v1/email/stats", headers=api.auth("admin"))
    assert stats.json()["counts"]["failed"] == 1 and stats.json()["queue"] == {"failed": 1}


async def test_4xx_answers_end_as_failed_after_max_attempts(people: Api, relay: Relay) -> None:
    api = people
    relay.answer("rcpt", *["452 4.2.2 mailbox full"] * email_send.MAX_ATTEMPTS)
    row_id = await add(api)
    assert (await sender_of(api).wait_final([row_id], 20))[row_id] == "failed"
    mail = await last_mail(api)
    assert mail["detail"].startswith(f"failed after {email_send.MAX_ATTEMPTS} attempts: 452")
    assert relay.messages == []


async def test_a_connection_lost_after_data_is_unknown_and_never_sent_again(
    people: Api, relay: Relay
) -> None:
    api = people
    relay.answer("data", DROP)  # the relay takes it and hangs up before saying so
    row_id = await add(api)
    assert (await sender_of(api).wait_final([row_id], 10))[row_id] == "unknown"
    assert len(relay.messages) == 1
    await sender_of(api).send_pass()  # another pass sends nothing
    assert len(relay.messages) == 1
    mail = await last_mail(api)
    assert mail["state"] == "unknown" and "after DATA" in mail["detail"]


async def test_a_gateway_dead_between_250_and_the_commit_never_sends_twice(
    people: Api, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = people
    sender = sender_of(api)
    recorded: list[str] = []
    reached = anyio.Event()

    async def dies(claim: Any, outcome: Any) -> None:  # the process ends before recording
        recorded.append(outcome.state)
        reached.set()

    monkeypatch.setattr(sender, "_record", dies)
    row_id = await add(api)
    await relay.wait_async(1)
    await sender.send_pass()  # the wake and this pass: whichever won sent it once
    # The relay has the message before the sender reads its 250: the wake's
    # sender may still be on its way to recording it when this pass returns.
    with anyio.fail_after(10):
        await reached.wait()
    assert recorded == ["sent"] and (await row(api, row_id)).state == "handed"
    monkeypatch.undo()
    # The lease runs out (the process is gone); a sender (a restart, a replica) passes.
    async with gateway_of(api).write() as s:
        await s.execute(
            update(EmailOutboxRow).values(claimed_until=utcnow() - timedelta(seconds=1))
        )
    await sender.send_pass()
    done = await row(api, row_id)
    assert done.state == "unknown" and done.message is None
    assert "not sent again" in (done.detail or "")
    assert len(relay.messages) == 1


async def test_a_claim_that_died_before_data_is_sent_by_the_next_sender(
    people: Api, relay: Relay
) -> None:
    api = people
    sender = sender_of(api)
    # Queued, then claimed by a sender that died at once (before MAIL FROM):
    # the stopped app's row, lease over.
    gw = gateway_of(api)
    relay.answer("rcpt", "451 4.3.0 later")  # keep the first try from delivering
    row_id = await add(api)
    await sender.wait_final([row_id], 0.0)
    async with gw.write() as s:
        await s.execute(
            update(EmailOutboxRow)
            .where(EmailOutboxRow.id == row_id)
            .values(state="sending", claimed_until=utcnow() - timedelta(seconds=1))
        )
    await sender.send_pass()
    assert (await sender.wait_final([row_id], 10))[row_id] == "sent"
    assert len(relay.messages) == 1


def outward_ip() -> str:
    """An address of this machine that is not loopback (where the relay then listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: it picks the route's source
        ip: str = s.getsockname()[0]
    return ip


async def test_no_starttls_from_a_relay_off_loopback_is_refused_before_mail(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, template_db: Path
) -> None:
    ip = outward_ip()
    if ip.startswith("127."):
        missing("this machine has no address but loopback, which a relay off loopback needs")
    with smtp_relay(host=ip) as far:
        settings = make_settings(
            request, tmp_path, db_backend, smtp_url=far.url, mail_from=MAIL_FROM
        )
        mail = await sent_with(settings, far, expect="failed")
        assert far.commands == []  # not even RCPT
        assert "offers no STARTTLS" in mail["detail"]


async def sent_with(settings: Settings, relay: Relay, expect: str) -> dict[str, Any]:
    import httpx

    from tests.conftest import ADMIN_PASSWORD, started_app

    async with (
        started_app(settings) as app,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c,
    ):
        api = Api(c)
        await api.login("admin", ADMIN_PASSWORD)
        await api.user("ana")
        row_id = await add(api)
        state = (await sender_of(api).wait_final([row_id], 10))[row_id]
        mail = await last_mail(api)
        assert state == expect, mail
        return mail


@pytest.mark.parametrize("password", ["s3cret pass", "wrong"])
async def test_the_login_uses_the_password_file(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db_backend: str,
    template_db: Path,  # made before the test's loop runs (make_settings copies it)
    password: str,
) -> None:
    with smtp_relay(users={"gw": "s3cret pass"}) as guarded:
        secret = tmp_path / "smtp-password"
        secret.write_text(f"{password}\n")
        settings = make_settings(
            request,
            tmp_path,
            db_backend,
            smtp_url=guarded.url_with_user("gw"),
            smtp_password_file=secret,
            mail_from=MAIL_FROM,
        )
        if password == "wrong":
            mail = await sent_with(settings, guarded, expect="failed")
            assert mail["status_code"] == 535 and guarded.messages == []
            assert guarded.commands and set(guarded.commands) == {"AUTH: bad"}  # each method
        else:
            await sent_with(settings, guarded, expect="sent")
            assert guarded.commands[0] == "AUTH: ok" and len(guarded.messages) == 1


@pytest.mark.parametrize(
    "settings", [{"email_max_addresses": 30, "email_verify_per_hour": 30}], indirect=True
)
async def test_replicas_sending_together_send_each_message_once(
    people: Api, relay: Relay, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from mailui4agents.db.engine import Database

    api = people
    mine = sender_of(api)

    async def idle() -> None:
        return None

    monkeypatch.setattr(mine, "send_pass", idle)  # queue all 20 before anyone sends
    ids = [await add(api, f"ana{i}@example.org") for i in range(20)]
    monkeypatch.undo()
    other = Database(settings.resolved_database_url())  # the other replicas' engine
    try:
        replicas = [mine, EmailSender(settings, other, None), EmailSender(settings, other, None)]
        async with anyio.create_task_group() as tg:
            for replica in replicas:
                tg.start_soon(replica.send_pass)
        states = await mine.wait_final(ids, 20)
    finally:
        await other.dispose()
    assert set(states.values()) == {"sent"}, states
    got = [m.message["Message-ID"] for m in relay.messages]
    assert len(got) == 20 and len(set(got)) == 20


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.e2e.remote_parts import make_certs

    return make_certs(tmp_path_factory.mktemp("relay-certs"))


def server_tls(certs: Any) -> Any:
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.cert, certs.key)
    return ctx


@pytest.mark.parametrize("implicit", [False, True], ids=["starttls", "smtps"])
async def test_tls_to_the_relay_starttls_when_offered_or_implicit(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db_backend: str,
    template_db: Path,
    certs: Any,
    implicit: bool,
) -> None:
    with smtp_relay(tls=server_tls(certs), implicit_tls=implicit) as secure:
        settings = make_settings(
            request,
            tmp_path,
            db_backend,
            smtp_url=secure.url,
            smtp_ca_file=certs.ca,
            mail_from=MAIL_FROM,
        )
        await sent_with(settings, secure, expect="sent")
        [got] = secure.messages
        assert got.tls


async def test_a_relay_certificate_nobody_trusts_fails_and_delivers_nothing(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db_backend: str,
    template_db: Path,
    certs: Any,
) -> None:
    with smtp_relay(tls=server_tls(certs)) as secure:
        settings = make_settings(
            request,
            tmp_path,
            db_backend,
            smtp_url=secure.url,  # no smtp_ca_file: the system's CAs do not know ours
            mail_from=MAIL_FROM,
            email_retry_base_s=0.01,
        )
        mail = await sent_with(settings, secure, expect="failed")
        assert "CERTIFICATE_VERIFY_FAILED" in mail["detail"], mail
        assert secure.messages == []
