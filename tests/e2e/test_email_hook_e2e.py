"""A reply from a person's own mail client decides a real waiting hook
(docs/email.md, "Replies"), every part real: a real `agentmail hook claude-code`
subprocess waits on a real gateway (uvicorn on 127.0.0.1 in a thread,
tests/live_app.py); the gateway sends its request e-mail by SMTP to an aiosmtpd
relay that delivers by LMTP into a real Dovecot (tests/fakes/dovecot.py); the
test plays ana's mail client: it reads her INBOX with imaplib, writes a reply the
way a client does (the original quoted below its attribution line) and submits
it with smtplib; the relay delivers it into the gateway's own Dovecot mailbox,
which the gateway's IMAP fetcher takes (services/email_fetch.py) and hands to
services/email_inbound.receive. The hook exits denied with the note."""

from __future__ import annotations

import email
import email.policy
import email.utils
import smtplib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import anyio
import httpx
import pytest

from mailui4agents.settings import Settings
from tests.conftest import ADMIN_PASSWORD, Api, make_settings
from tests.email.replies import verify
from tests.fakes.dovecot import GATEWAY, PERSON, USERS, Dovecot, dovecot_server
from tests.fakes.smtp_relay import Relay, smtp_relay
from tests.hooks.harness import claude_input, hook_env, spawn
from tests.hooks.test_claude_code import verdict
from tests.live_app import LiveApp, live_app

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CC = "claude-code"


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    with dovecot_server() as server:
        yield server


@pytest.fixture
def relay(dovecot: Dovecot) -> Iterator[Relay]:
    with smtp_relay(deliver_to=dovecot) as r:
        yield r


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, relay: Relay, dovecot: Dovecot
) -> Settings:
    secret = tmp_path / "imap-password"
    secret.write_text(USERS[GATEWAY] + "\n", encoding="utf-8")
    return make_settings(
        request,
        tmp_path,
        db_backend,
        smtp_url=relay.url,
        mail_from=GATEWAY,
        imap_url=dovecot.url(GATEWAY),
        imap_password_file=secret,
    )


@dataclass
class World:
    live: LiveApp
    api: Api
    sid: str
    tmp: Path

    def hook_env(self) -> dict[str, str]:
        env = hook_env(self.live.url, self.api.tokens["claude"], self.tmp / "home", self.tmp / "hd")
        return {**env, "AGENTMAIL_SESSION_ID": self.sid}


@pytest.fixture
async def world(settings: Settings, relay: Relay, tmp_path: Path) -> AsyncIterator[World]:
    (tmp_path / "home").mkdir()
    (tmp_path / "hd").mkdir()
    with live_app(settings) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            await api.user("ana")
            await api.agent("claude", owners=["ana"])
            await verify(api, relay, "ana", PERSON)
            r = await api.send("ana", ["claude@/srv/shop.new"], subject=uuid.uuid4().hex)
            assert r.status_code == 201, r.text
            yield World(live, api, str(r.json()["session_id"]), tmp_path)


def _inbox(dovecot: Dovecot) -> list[EmailMessage]:
    return [
        email.message_from_bytes(raw, policy=email.policy.default)
        for raw in dovecot.messages(PERSON)
    ]


async def _request_in_inbox(dovecot: Dovecot, sid: str, within_s: float = 30.0) -> EmailMessage:
    """The request e-mail of session `sid`, once it is in ana's INBOX (read as a
    client reads it; the module's Dovecot keeps the other tests' mail)."""
    with anyio.fail_after(within_s):
        while True:
            found = [
                m
                for m in _inbox(dovecot)
                if "Approval: Bash" in str(m["Subject"]) and sid in str(m["In-Reply-To"])
            ]
            if found:
                return found[0]
            n = dovecot.count(PERSON)
            await anyio.to_thread.run_sync(dovecot.wait_count, PERSON, n + 1, within_s)


def _reply(original: EmailMessage, first_line: str) -> EmailMessage:
    """A reply as a mail client writes it: To the Reply-To, "Re:", In-Reply-To
    and References of the original, the original quoted below."""
    quoted_body = original.get_body(("plain",))
    assert quoted_body is not None
    quoted = "\n".join(f"> {line}" for line in quoted_body.get_content().splitlines())
    msg = EmailMessage()
    msg["From"] = f"Ana <{PERSON}>"
    msg["To"] = str(original["Reply-To"])
    msg["Subject"] = f"Re: {original['Subject']}"
    msg["Date"] = email.utils.formatdate(localtime=True)
    msg["Message-ID"] = email.utils.make_msgid(domain="example.org")
    msg["In-Reply-To"] = str(original["Message-ID"])
    msg["References"] = f"{original['References']} {original['Message-ID']}"
    when = str(original["Date"])
    msg.set_content(f"{first_line}\n\nOn {when}, agentmail <{GATEWAY}> wrote:\n{quoted}\n")
    return msg


def _submit(relay: Relay, msg: EmailMessage) -> None:
    host, port = relay.url.removeprefix("smtp://").rsplit(":", 1)
    with smtplib.SMTP(host, int(port), timeout=30) as client:
        client.send_message(msg)


async def test_a_reply_from_the_mail_client_denies_the_waiting_hook_with_its_note(
    world: World, dovecot: Dovecot, relay: Relay
) -> None:
    payload = claude_input(tool_input={"command": "psql prod", "description": "Migrate"})
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, CC, payload, world.hook_env(), world.tmp)
        original = await _request_in_inbox(dovecot, world.sid)
        # The thread in ana's mailbox: the session's root, then her copy's token.
        root = str(original["In-Reply-To"])
        assert root.startswith(f"<session.{world.sid}@")
        assert str(original["References"]).split()[0] == root
        assert str(original["Reply-To"]).startswith("agentmail+")
        reply = _reply(original, "deny use the staging db")
        await anyio.to_thread.run_sync(_submit, relay, reply)
        run = await hook.result()
    decision, reason = verdict(run)
    assert decision == "deny", run
    assert "use the staging db" in reason and "ana" in reason, reason
    # A second copy of the same reply (a resend) is taken from the mailbox and
    # does nothing: a duplicate of the one already acted on.
    gw = world.live.gateway
    await anyio.to_thread.run_sync(_submit, relay, reply)
    # smtplib returned after the relay's 250, i.e. after the LMTP delivery; the
    # fetcher expunges a message only after receive() returned.
    await anyio.to_thread.run_sync(dovecot.wait_empty, GATEWAY, 30.0)
    counts = gw.email_in_counts
    assert (counts["decided"], counts["duplicate"]) == (1, 1), counts
    r = await world.api.http.get(
        "/api/v1/permissions",
        params={"session_id": world.sid, "status": "decided"},
        headers=world.api.auth("ana"),
    )
    assert r.status_code == 200, r.text
    [req] = [p for p in r.json()["items"] if p["tool_name"] == "Bash"]
    assert (req["decision"], req["note"]) == ("deny", "use the staging db"), req
