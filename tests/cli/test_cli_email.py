"""``agentmail user email add|list|remove`` and ``agentmail serve --smtp-url``: the
real console script against a real gateway that mails through a real SMTP relay
(tests/fakes/smtp_relay.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from tests.conftest import ADMIN_PASSWORD, admin_api, copy_template
from tests.fakes.smtp_relay import Relay, smtp_relay

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]


@pytest.fixture(scope="module")
def relay() -> Iterator[Relay]:
    with smtp_relay() as r:
        yield r


@pytest.fixture(scope="module")
def mailing_gateway(
    tmp_path_factory: pytest.TempPathFactory, template_db: Path, relay: Relay
) -> Iterator[GatewayProcess]:
    data_dir = tmp_path_factory.mktemp("mailing-gateway") / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(
        data_dir=data_dir,
        env=testing.clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **testing.FAST_HASH_ENV),
        extra_args=["--smtp-url", relay.url, "--mail-from", "agentmail@gw.test"],
    )
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):
        return await anyio.run_process(
            [*AGENTMAIL, *args], env=env, check=False, stdin=subprocess.DEVNULL
        )


async def test_add_list_verify_and_remove_an_address(
    mailing_gateway: GatewayProcess, relay: Relay, tmp_path: Path
) -> None:
    async with admin_api(mailing_gateway.url) as live:
        token = await live.user("ana")
    env = testing.clean_env(
        AGENTMAIL_URL=mailing_gateway.url,
        AGENTMAIL_TOKEN=token,
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
    )
    added = await cli(env, "user", "email", "add", "Ana@Example.org")
    assert added.returncode == 0, added.stderr.decode()
    assert "ana@example.org" in added.stdout.decode()
    [got] = await relay.wait_async(1)
    body = got.message.get_body(("plain",))
    assert body is not None
    link = re.search(r"http://\S+/verify-email/[A-Za-z0-9_-]{43}", body.get_content())
    assert link, body.get_content()

    async def listing() -> str:
        done = await cli(env, "user", "email", "list")
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    with anyio.fail_after(20):  # the relay answered; the row says so a moment later
        while "sent: 250" not in (text := await listing()):
            pass  # each turn is a whole CLI run
    assert text.startswith("ana@example.org  unverified (link until "), text

    async with httpx.AsyncClient(timeout=30) as browser:
        assert (await browser.get(link.group(0))).status_code == 200
        assert "unverified" in await listing()
        assert (await browser.post(link.group(0))).status_code == 200
    assert "ana@example.org  verified " in await listing()

    removed = await cli(env, "user", "email", "remove", "ana@example.org")
    assert removed.returncode == 0 and "Removed ana@example.org." in removed.stdout.decode()
    assert "No e-mail addresses" in await listing()
    again = await cli(env, "user", "email", "remove", "ana@example.org")
    assert again.returncode == 1 and "not one of your addresses" in again.stderr.decode()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--smtp-url", "smtp://gw:secret@127.0.0.1:25"], "must not hold the password"),
        (["--smtp-url", "smtp://gw@127.0.0.1:25"], "needs mail_from"),
        (
            [
                "--smtp-url",
                "smtp://gw@127.0.0.1:25",
                "--mail-from",
                "a@gw.test",
                "--smtp-password-file",
                "/nonexistent/smtp-password",
            ],
            "cannot read the SMTP password file",
        ),
        (["--imap-url", "imaps://gw:secret@127.0.0.1:993/INBOX"], "must not hold the password"),
        (["--imap-url", "imaps://gw@127.0.0.1:993/INBOX"], "needs mail_from"),
        (
            [
                "--imap-url",
                "imaps://gw@127.0.0.1:993/INBOX",
                "--mail-from",
                "a@gw.test",
                "--imap-password-file",
                "/nonexistent/imap-password",
            ],
            "cannot read the IMAP password file",
        ),
        (["--smtp-listen", "2525", "--mail-from", "a@gw.test"], "HOST:PORT"),
    ],
)
async def test_serve_refuses_a_bad_smtp_setup_before_it_starts(
    tmp_path: Path, args: list[str], says: str
) -> None:
    env = testing.clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    done = await cli(env, "serve", "--port", "0", "--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 2, done.stderr.decode()
    assert says in done.stderr.decode()
