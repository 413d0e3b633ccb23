"""The IMAP fetcher (services/email_fetch.py) against a real Dovecot
(tests/fakes/dovecot.py): each message of the gateway's mailbox reaches the
handler once, is removed only after the handler returned, stays when the handler
raises, and the fetcher waits with IDLE and comes back after Dovecot restarts.
Marked e2e: Dovecot is a process (not in `make check`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mailui4agents.services.email_fetch import ImapFetcher
from mailui4agents.services.email_inbound import Received
from mailui4agents.settings import Settings
from tests.fakes.dovecot import GATEWAY, PERSON, USERS, Dovecot, dovecot_server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


@pytest.fixture(scope="module")
def server() -> Iterator[Dovecot]:
    with dovecot_server() as d:
        yield d


@pytest.fixture
def dovecot(server: Dovecot) -> Iterator[Dovecot]:
    """The module's Dovecot with an empty gateway mailbox for each test."""
    empty(server)
    yield server
    empty(server)


def empty(d: Dovecot) -> None:
    client = d.imap(GATEWAY)
    try:
        _typ, data = client.select("INBOX")
        if int(data[0] or b"0"):
            client.store("1:*", "+FLAGS.SILENT", r"(\Deleted)")
            client.expunge()
    finally:
        client.logout()


def mail(n: int, size: int = 0) -> bytes:
    body = b"x" * size if size else f"reply {n}".encode()
    return (
        (
            f"From: Ana <{PERSON}>\r\nTo: agentmail+t{n}@gw.test\r\n"
            f"Subject: Re: request {n}\r\nMessage-ID: <reply.{n}@example.org>\r\n\r\n"
        ).encode()
        + body
        + b"\r\n"
    )


def deliver(d: Dovecot, *ns: int, size: int = 0) -> None:
    for n in ns:
        said = d.lmtp_deliver(PERSON, [f"agentmail+t{n}@gw.test"], mail(n, size))
        assert set(said.values()) == {"250 saved"}, said


def message_ids(raws: list[bytes]) -> list[str]:
    import email

    return [str(email.message_from_bytes(r)["Message-ID"]) for r in raws]


class Recorder:
    """A handler that records each message, and checks that it is still in the
    mailbox while it is being handled (removal comes after)."""

    def __init__(self, d: Dovecot, fail: set[str] | None = None) -> None:
        self.d = d
        self.got: list[bytes] = []
        self.in_mailbox_while_handled: list[int] = []
        self.fail = fail or set()
        self.arrived = anyio.Event()

    async def __call__(self, raw: bytes) -> Received:
        self.in_mailbox_while_handled.append(await anyio.to_thread.run_sync(self.d.count, GATEWAY))
        self.got.append(raw)
        self.arrived.set()
        self.arrived = anyio.Event()
        [mid] = message_ids([raw])
        if mid in self.fail:
            raise RuntimeError(f"handler failed on {mid}")
        return Received("refused", "test")

    async def wait(self, n: int, within_s: float = 10) -> None:
        with anyio.fail_after(within_s):
            while len(self.got) < n:
                await self.arrived.wait()


def settings_for(tmp_path: Path, d: Dovecot, **extra: Any) -> Settings:
    password = tmp_path / "imap-password"
    password.write_text(USERS[GATEWAY] + "\n")
    return Settings(
        data_dir=tmp_path,
        imap_url=d.url(GATEWAY),
        imap_password_file=password,
        mail_from=GATEWAY,
        **extra,
    )


def fetcher(tmp_path: Path, d: Dovecot, handler: Any, **extra: Any) -> ImapFetcher:
    from mailui4agents.services.email_fetch import load_password

    s = settings_for(tmp_path, d, **extra)
    return ImapFetcher(s, load_password(s), handler, backoff_base_s=0.05)


@contextlib.asynccontextmanager
async def running(f: ImapFetcher) -> AsyncIterator[anyio.Event]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(f.run, stop)
        try:
            yield stop
        finally:
            stop.set()


async def test_each_message_is_handed_over_once_and_removed_only_after_the_handler(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    deliver(dovecot, 1, 2, 3)
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec)
    await f._connect()
    try:
        assert await f.fetch_pass() is False
        assert sorted(message_ids(rec.got)) == [f"<reply.{n}@example.org>" for n in (1, 2, 3)]
        # While each was handled it was still there: 3, then 2, then 1 left.
        assert rec.in_mailbox_while_handled == [3, 2, 1]
        assert dovecot.count(GATEWAY) == 0
        await f.fetch_pass()  # nothing again
        assert len(rec.got) == 3
        assert f.counts["handled"] == 3 and f.counts["removed"] == 3
        assert f.counts["outcome_refused"] == 3
        # The bytes are the message as delivered (Dovecot's trace headers first).
        assert rec.got[0].endswith(mail(1).split(b"\r\n\r\n", 1)[1])
    finally:
        await anyio.to_thread.run_sync(f._close)


async def test_a_handler_that_raises_leaves_the_message_for_the_next_pass(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    deliver(dovecot, 1, 2)
    rec = Recorder(dovecot, fail={"<reply.1@example.org>"})
    f = fetcher(tmp_path, dovecot, rec)
    await f._connect()
    try:
        await f.fetch_pass()
        assert f.counts["handler_errors"] == 1 and f.counts["removed"] == 1
        [left] = dovecot.messages(GATEWAY)
        assert message_ids([left]) == ["<reply.1@example.org>"]
        deliver(dovecot, 3)
        rec.fail.clear()
        await f.fetch_pass()
        # The new one first, then the one that failed before; both gone now.
        assert message_ids(rec.got[2:]) == ["<reply.3@example.org>", "<reply.1@example.org>"]
        assert dovecot.count(GATEWAY) == 0
    finally:
        await anyio.to_thread.run_sync(f._close)


async def test_a_message_over_the_size_limit_stays_unread_and_the_rest_go_on(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    deliver(dovecot, 1, size=5000)
    deliver(dovecot, 2)
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec, email_in_max_bytes=4096)
    await f._connect()
    try:
        await f.fetch_pass()
        await f.fetch_pass()
        assert message_ids(rec.got) == ["<reply.2@example.org>"]
        assert f.counts["too_big"] == 1  # once, not once per pass
        client = dovecot.imap(GATEWAY)
        try:
            client.select("INBOX", readonly=True)
            _typ, data = client.search(None, "UNSEEN")
            assert data[0] == b"1"  # still there, unread
        finally:
            client.logout()
    finally:
        await anyio.to_thread.run_sync(f._close)


async def test_a_pass_takes_at_most_email_in_per_pass_and_the_loop_takes_the_rest(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    deliver(dovecot, *range(5))
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec, email_in_per_pass=2, imap_poll_s=60)
    await f._connect()
    try:
        assert await f.fetch_pass() is True
        assert len(rec.got) == 2
    finally:
        await anyio.to_thread.run_sync(f._close)
    async with running(f):
        await rec.wait(5)
    assert len(set(message_ids(rec.got))) == 5


async def test_new_mail_is_fetched_by_idle_and_stop_ends_the_idle_at_once(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec, imap_poll_s=120)  # a poll would come far too late
    async with running(f) as stop:
        await until(f, "idles", 1)
        assert f.idle_supported is True
        deliver(dovecot, 7)
        await rec.wait(1, within_s=10)
        assert f.counts["idle_mail"] == 1
        await until(f, "idles", 2)  # idling again after that pass
        stop.set()
        with anyio.fail_after(5):  # not the 120 s of the IDLE
            await until(f, "idle_stop", 1)
    assert message_ids(rec.got) == ["<reply.7@example.org>"]
    assert dovecot.count(GATEWAY) == 0


async def until(f: ImapFetcher, count: str, n: int, within_s: float = 10) -> None:
    with anyio.fail_after(within_s):
        while f.counts[count] < n:
            await f.wait_progress(1)


async def test_the_fetcher_comes_back_after_dovecot_crashes_and_restarts(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec, imap_poll_s=120)
    async with running(f):
        deliver(dovecot, 1)
        await rec.wait(1)  # in the pass, before the IDLE that follows it
        await until(f, "idles", f.counts["idles"] + 1)
        await anyio.to_thread.run_sync(lambda: dovecot.restart(crash=True))
        deliver(dovecot, 2)
        await rec.wait(2, within_s=20)
    assert message_ids(rec.got) == ["<reply.1@example.org>", "<reply.2@example.org>"]
    assert f.counts["connection_errors"] >= 1 and f.counts["connects"] >= 2
    assert dovecot.count(GATEWAY) == 0


async def test_a_wrong_password_is_counted_and_retried_and_nothing_is_taken(
    dovecot: Dovecot, tmp_path: Path
) -> None:
    from mailui4agents.services.email_fetch import ImapFetcher

    deliver(dovecot, 1)
    rec = Recorder(dovecot)
    s = settings_for(tmp_path, dovecot)
    f = ImapFetcher(s, "not-the-password", rec, backoff_base_s=0.05)
    async with running(f):
        await until(f, "connection_errors", 1)
    assert "AUTHENTICATIONFAILED" in (f.last_error or ""), f.last_error
    assert rec.got == [] and dovecot.count(GATEWAY) == 1


@pytest.fixture
def gateway_settings(
    dovecot: Dovecot, tmp_path: Path, request: pytest.FixtureRequest, db_backend: str
) -> Settings:
    """Settings of a gateway fetching the Dovecot mailbox (made before the test's
    event loop runs: the PostgreSQL fixtures start one of their own)."""
    from tests.conftest import make_settings

    password = tmp_path / "imap-password"
    password.write_text(USERS[GATEWAY] + "\n")
    return make_settings(
        request,
        tmp_path,
        db_backend,
        imap_url=dovecot.url(GATEWAY),
        imap_password_file=password,
        mail_from=GATEWAY,
    )


async def test_the_gateway_hands_its_mailbox_to_receive_and_empties_it(
    dovecot: Dovecot, gateway_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's lifespan runs the fetcher when imap_url is set, and each message
    reaches email_inbound.receive(gw, raw, via="imap") (a recorder here: what a
    reply means is not this test's concern)."""
    from mailui4agents.services import email_inbound
    from tests.conftest import started_app

    calls: list[tuple[Any, bytes, str]] = []
    arrived = anyio.Event()

    async def receive(gw: Any, raw: bytes, *, via: str, envelope_to: Any = ()) -> Received:
        calls.append((gw, raw, via))
        arrived.set()
        return Received("refused", "test")

    monkeypatch.setattr(email_inbound, "receive", receive)
    settings = gateway_settings
    deliver(dovecot, 4)
    async with started_app(settings) as app:
        gw = app.state.gateway
        assert gw.imap is not None
        with anyio.fail_after(10):
            await arrived.wait()
        await until(gw.imap, "removed", 1)
    [(got_gw, raw, via)] = calls
    assert got_gw is gw and via == "imap"
    assert message_ids([raw]) == ["<reply.4@example.org>"]
    assert dovecot.count(GATEWAY) == 0


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dovecot]:
    from tests.e2e.remote_parts import make_certs

    with dovecot_server(certs=make_certs(tmp_path_factory.mktemp("imap-certs"))) as d:
        yield d


@pytest.mark.parametrize("scheme", ["imap", "imaps"], ids=["starttls", "imaps"])
async def test_tls_to_the_mailbox_starttls_when_offered_or_implicit(
    tls_server: Dovecot, tmp_path: Path, scheme: str
) -> None:
    d = tls_server
    empty(d)
    deliver(d, 1)
    rec = Recorder(d)
    s = settings_for(tmp_path, d, imap_ca_file=d.certs.ca).model_copy(
        update={"imap_url": d.url(GATEWAY, scheme=scheme)}
    )
    f = ImapFetcher(s, USERS[GATEWAY], rec)
    await f._connect()
    try:
        sock = f._cl().socket()
        import ssl

        assert isinstance(sock, ssl.SSLSocket) and sock.version() is not None
        await f.fetch_pass()
    finally:
        await anyio.to_thread.run_sync(f._close)
    assert message_ids(rec.got) == ["<reply.1@example.org>"]
    assert "TLS" in d.log()


async def test_a_mailbox_certificate_nobody_trusts_is_refused_before_the_login(
    tls_server: Dovecot, tmp_path: Path
) -> None:
    d = tls_server
    empty(d)
    deliver(d, 1)
    rec = Recorder(d)
    s = settings_for(tmp_path, d).model_copy(  # no imap_ca_file: the system's CAs
        update={"imap_url": d.url(GATEWAY, scheme="imaps")}
    )
    f = ImapFetcher(s, USERS[GATEWAY], rec, backoff_base_s=0.05)
    async with running(f):
        await until(f, "connection_errors", 1)
    assert "CERTIFICATE_VERIFY_FAILED" in (f.last_error or ""), f.last_error
    assert rec.got == [] and d.count(GATEWAY) == 1


async def test_without_idle_the_fetcher_polls_every_imap_poll_s(
    dovecot: Dovecot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = ImapFetcher._open

    def no_idle(self: ImapFetcher) -> None:
        opened(self)
        self.idle_supported = False  # as a server that does not offer IDLE

    monkeypatch.setattr(ImapFetcher, "_open", no_idle)
    rec = Recorder(dovecot)
    f = fetcher(tmp_path, dovecot, rec, imap_poll_s=0.2)
    async with running(f):
        await until(f, "passes", 1)
        deliver(dovecot, 9)
        await rec.wait(1, within_s=5)
    assert f.counts["idles"] == 0 and f.counts["passes"] >= 2
    assert message_ids(rec.got) == ["<reply.9@example.org>"]


async def test_with_the_real_receive_a_strangers_mail_is_refused_recorded_and_removed(
    dovecot: Dovecot, gateway_settings: Settings
) -> None:
    """No recorder: services/email_inbound.receive itself. A mail from an address
    nobody verified is refused (`unknown_sender`), which is an outcome, not an
    error: the fetcher removes it, and the inbound log holds it once."""
    from tests.conftest import started_app
    from tests.pg_fixtures import db_scalar

    deliver(dovecot, 5)
    async with started_app(gateway_settings) as app:
        gw = app.state.gateway
        await until(gw.imap, "removed", 1)
        assert gw.imap.counts["outcome_refused"] == 1
        assert gw.imap.counts["handler_errors"] == 0
        assert gw.email_in_counts["refused:unknown_sender"] == 1
    assert dovecot.count(GATEWAY) == 0
    sql = "SELECT count(*) FROM email_inbound WHERE via = 'imap' AND reason = 'unknown_sender'"
    assert await anyio.to_thread.run_sync(lambda: db_scalar(gateway_settings, sql)) == 1
