"""Durability of the outgoing queue with a real gateway process (docs/email.md,
"The outgoing queue"): 50 e-mails queued while the relay is down, the gateway
SIGKILLed, the relay back, the gateway restarted: each e-mail arrives exactly
once, counted in the person's Dovecot mailbox (the relay delivers what it takes
by LMTP, tests/fakes/dovecot.py). The 50 addresses are `ana+N@example.org`:
Dovecot's plus-addressing puts them all in ana@example.org's INBOX."""

from __future__ import annotations

import email
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, admin_api, copy_template
from tests.fakes.dovecot import PERSON, Dovecot, dovecot_server
from tests.fakes.smtp_relay import smtp_relay

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

N = 50


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with dovecot_server() as d:
        yield d


@pytest.fixture
def gateway(tmp_path: Path, template_db: Path) -> Iterator[GatewayProcess]:
    with smtp_relay() as probe:  # a port that is free, then closed again
        port = probe.port
    data_dir = tmp_path / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(
        data_dir=data_dir,
        env=testing.clean_env(
            AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
            AGENTMAIL_EMAIL_MAX_ADDRESSES=str(N),
            AGENTMAIL_EMAIL_VERIFY_PER_HOUR=str(N),
            AGENTMAIL_EMAIL_RETRY_BASE_S="5",
            AGENTMAIL_EMAIL_POLL_S="0.5",
            **testing.FAST_HASH_ENV,
        ),
        extra_args=["--smtp-url", f"smtp://127.0.0.1:{port}", "--mail-from", "gw@gw.test"],
    )
    gp.relay_port = port  # type: ignore[attr-defined]
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


async def test_fifty_queued_e_mails_survive_a_sigkill_and_arrive_once_each(
    gateway: GatewayProcess, dovecot: Dovecot
) -> None:
    async with admin_api(gateway.url) as api:
        await api.user("ana")
        for i in range(N):
            r = await api.http.post(
                "/api/v1/me/emails",
                json={"address": f"ana+{i}@example.org"},
                headers=api.auth("ana"),
            )
            assert r.status_code == 201, r.text

        async def states() -> list[dict[str, Any]]:
            r = await api.http.get("/api/v1/me/emails", headers=api.auth("ana"))
            return [i["last_mail"] for i in r.json()["items"]]

        # Each has been tried once (the relay is down: connection refused) and waits.
        with anyio.fail_after(30):
            while not all(
                m["state"] == "queued" and "retrying" in (m["detail"] or "") for m in await states()
            ):
                pass  # each turn is an HTTP round trip
        ids = {m["message_id"] for m in await states()}
        assert len(ids) == N
    gateway.kill()

    with smtp_relay(port=gateway.relay_port, deliver_to=dovecot) as relay:  # type: ignore[attr-defined]
        gateway.start(port=gateway.port)
        got = await relay.wait_async(N, within_s=60)
        async with admin_api(gateway.url) as api:
            await api.login("ana", USER_PASSWORD)
            with anyio.fail_after(30):
                while any(m["state"] != "sent" for m in await states_of(api)):
                    pass
        assert len(got) == N
        # Counted where a mail client would see them: in the mailbox, by IMAP.
        mailbox = [
            email.message_from_bytes(raw)
            for raw in await anyio.to_thread.run_sync(dovecot.messages, PERSON)
        ]
        counted = Counter(m["Message-ID"] for m in mailbox)
        assert set(counted) == ids and set(counted.values()) == {1}
        assert {m["Delivered-To"] for m in mailbox} == {f"ana+{i}@example.org" for i in range(N)}


async def states_of(api: Any) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/me/emails", headers=api.auth("ana"))
    return [i["last_mail"] for i in r.json()["items"]]
