"""`agentmail serve --imap-url … --imap-password-file … --smtp-listen …` as a real
process: the flags reach the transports (docs/email.md, "Receiving"). The
fetcher logs in to a real Dovecot and makes its passes; the listener refuses a
recipient of another domain. What a message means (receive()) is not this
test's concern: it checks only what holds whatever receive() does."""

from __future__ import annotations

import smtplib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess
from tests.conftest import ADMIN_PASSWORD, admin_api, copy_template
from tests.fakes.dovecot import GATEWAY, USERS, Dovecot, dovecot_server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with dovecot_server() as d:
        yield d


@pytest.fixture
def gateway(tmp_path: Path, template_db: Path, dovecot: Dovecot) -> Iterator[GatewayProcess]:
    data_dir = tmp_path / "data"
    copy_template(template_db, data_dir)
    password = tmp_path / "imap-password"
    password.write_text(USERS[GATEWAY] + "\n")
    listen = free_port()
    gp = GatewayProcess(
        data_dir=data_dir,
        env=testing.clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **testing.FAST_HASH_ENV),
        extra_args=[
            "--mail-from",
            GATEWAY,
            "--imap-url",
            dovecot.url(GATEWAY),
            "--imap-password-file",
            str(password),
            "--smtp-listen",
            f"127.0.0.1:{listen}",
        ],
    )
    gp.listen_port = listen  # type: ignore[attr-defined]
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


async def test_serve_runs_the_imap_fetcher_and_the_smtp_listener_from_its_flags(
    gateway: GatewayProcess,
) -> None:
    async with admin_api(gateway.url) as api:

        async def stats() -> dict[str, Any]:
            r = await api.http.get("/api/v1/email/stats", headers=api.auth("admin"))
            assert r.status_code == 200, r.text
            got: dict[str, Any] = r.json()
            return got

        with anyio.fail_after(20):
            while (await stats())["imap"]["counts"].get("passes", 0) < 1:
                pass  # each turn is an HTTP round trip
        got = await stats()
        assert got["imap"]["source"].startswith("imap://agentmail@gw.test@127.0.0.1:")
        assert got["imap"]["counts"]["connects"] >= 1
        assert got["imap"]["counts"].get("connection_errors", 0) == 0, got["imap"]

        def refused() -> Any:
            with smtplib.SMTP("127.0.0.1", gateway.listen_port, timeout=10) as smtp:  # type: ignore[attr-defined]
                smtp.ehlo()
                smtp.mail("ana@example.org")
                return smtp.rcpt("ana@example.org")

        code, text = await anyio.to_thread.run_sync(refused)
        assert code == 550 and b"gw.test only" in text
        assert (await stats())["smtp_listener"]["counts"]["rcpt_refused"] == 1
