"""The SMTP listener (services/email_listen.py) in a running in-process gateway
(`smtp_listen = 127.0.0.1:0`), spoken to with smtplib as an MX would: mail for
the gateway's domain reaches receive() with its bytes and envelope, and is
answered 250 only after it returned; another domain's RCPT is 550, a message
over email_in_max_bytes 552, a receive() that raises 451.

receive() itself (services/email_inbound.py) is replaced by a recorder here:
these tests are about the transport, not about what a reply means."""

from __future__ import annotations

import smtplib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from mailui4agents.services import email_inbound
from mailui4agents.services.email_inbound import Received
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import Api, make_settings
from tests.email.conftest import MAIL_FROM, gateway_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(
        request,
        tmp_path,
        db_backend,
        smtp_listen="127.0.0.1:0",
        mail_from=MAIL_FROM,
        email_in_max_bytes=4096,
    )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    async def __call__(
        self, gw: Gateway, raw: bytes, *, via: str, envelope_to: Sequence[str] = ()
    ) -> Received:
        self.calls.append({"gw": gw, "raw": raw, "via": via, "envelope_to": list(envelope_to)})
        if self.fail is not None:
            raise self.fail
        return Received("refused", "test")


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(email_inbound, "receive", rec)
    return rec


MESSAGE = (
    b"From: Ana <ana@example.org>\r\nTo: agentmail+tok@gw.test\r\n"
    b"Subject: Re: approve?\r\nMessage-ID: <r1@example.org>\r\n\r\napprove\r\n"
)


def send(port: int, rcpts: list[str], data: bytes = MESSAGE) -> dict[str, Any]:
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
        return dict(smtp.sendmail("ana@example.org", rcpts, data))


async def in_thread(fn: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(lambda: fn(*args))


async def test_mail_for_the_gateways_domain_reaches_receive_with_its_envelope(
    api: Api, received: Recorder
) -> None:
    gw = gateway_of(api)
    assert gw.smtp_in is not None and gw.smtp_in.port > 0
    refused = await in_thread(
        send, gw.smtp_in.port, ["agentmail+tok@gw.test", "Claude+Shop@GW.test"]
    )
    assert refused == {}
    [call] = received.calls
    assert call["gw"] is gw and call["via"] == "smtp"
    # Lower-cased as the gateway compares addresses (domain/email_address.py).
    assert call["envelope_to"] == ["agentmail+tok@gw.test", "claude+shop@gw.test"]
    assert call["raw"] == MESSAGE
    assert gw.smtp_in.counts["accepted"] == 1 and gw.smtp_in.counts["outcome_refused"] == 1
    stats = (await api.http.get("/api/v1/email/stats", headers=api.auth("admin"))).json()
    assert stats["smtp_listener"] == {
        "source": f"127.0.0.1:{gw.smtp_in.port}",
        "counts": {"accepted": 1, "outcome_refused": 1},
        "last_error": None,
    }
    assert stats["imap"] is None and stats["configured"] is False


async def test_another_domains_recipient_is_refused_and_never_reaches_receive(
    api: Api, received: Recorder
) -> None:
    gw = gateway_of(api)
    assert gw.smtp_in is not None
    with pytest.raises(smtplib.SMTPRecipientsRefused) as err:
        await in_thread(send, gw.smtp_in.port, ["ana@example.org"])
    code, text = err.value.recipients["ana@example.org"]
    assert code == 550 and b"gw.test only" in text
    assert received.calls == []
    # Mixed: the gateway's own address is taken, the other refused.
    refused = await in_thread(send, gw.smtp_in.port, ["agentmail@gw.test", "x@gw.test.evil.org"])
    assert set(refused) == {"x@gw.test.evil.org"}
    assert [c["envelope_to"] for c in received.calls] == [["agentmail@gw.test"]]


async def test_a_message_over_email_in_max_bytes_is_refused_with_552(
    api: Api, received: Recorder
) -> None:
    gw = gateway_of(api)
    assert gw.smtp_in is not None
    big = MESSAGE + (b"x" * 70 + b"\r\n") * 80

    # smtplib announces the size (MAIL FROM … SIZE=) since EHLO offered SIZE 4096.
    with pytest.raises(smtplib.SMTPSenderRefused) as announced:
        await in_thread(send, gw.smtp_in.port, ["agentmail@gw.test"], big)
    assert announced.value.smtp_code == 552

    def unannounced() -> tuple[int, bytes]:
        with smtplib.SMTP("127.0.0.1", gw.smtp_in.port, timeout=10) as smtp:  # type: ignore[union-attr]
            smtp.ehlo()
            smtp.mail("ana@example.org")
            smtp.rcpt("agentmail@gw.test")
            return smtp.data(big)

    code, _ = await in_thread(unannounced)
    assert code == 552
    assert received.calls == []
    # Just under the limit goes through.
    assert await in_thread(send, gw.smtp_in.port, ["agentmail@gw.test"], MESSAGE) == {}
    assert len(received.calls) == 1


async def test_receive_raising_is_answered_451_so_the_sender_tries_again(
    api: Api, received: Recorder
) -> None:
    gw = gateway_of(api)
    assert gw.smtp_in is not None
    received.fail = RuntimeError("database gone")
    with pytest.raises(smtplib.SMTPDataError) as err:
        await in_thread(send, gw.smtp_in.port, ["agentmail@gw.test"])
    assert err.value.smtp_code == 451
    assert gw.smtp_in.counts["handler_errors"] == 1 and gw.smtp_in.counts["accepted"] == 0
    received.fail = None
    assert await in_thread(send, gw.smtp_in.port, ["agentmail@gw.test"]) == {}  # the retry
    assert len(received.calls) == 2


def test_settings_refuse_a_listener_address_that_is_not_host_port(tmp_path: Path) -> None:
    for bad in ("2525", "localhost", "::1:25", "[::1:25", "host:99999", "host:port"):
        with pytest.raises(ValueError, match=r"SMTP listener|IPv6"):
            Settings(data_dir=tmp_path, smtp_listen=bad, mail_from=MAIL_FROM)
    with pytest.raises(ValueError, match="smtp_listen needs mail_from"):
        Settings(data_dir=tmp_path, smtp_listen="127.0.0.1:2525")
    Settings(data_dir=tmp_path, smtp_listen="[::1]:2525", mail_from=MAIL_FROM)


async def test_with_the_real_receive_a_strangers_mail_is_taken_250_and_refused(
    api: Api,
) -> None:
    """No recorder: receive() refuses a mail nobody verified (an outcome, so the
    MX is told 250 and does not send it again)."""
    gw = gateway_of(api)
    assert gw.smtp_in is not None
    assert await in_thread(send, gw.smtp_in.port, ["agentmail+tok@gw.test"]) == {}
    assert gw.smtp_in.counts["outcome_refused"] == 1
    assert gw.email_in_counts["refused:unknown_sender"] == 1
