"""New work by e-mail reaches a real bridge: services/email_work.start (what
the inbound e-mail path calls for a mail to `agent+shop@…`) starts a session in
the alias's workspace, and a real `agentmail bridge` with the command runner
answers in that session. The gateway is real uvicorn on 127.0.0.1 in this test's
own event loop, so the test calls start() on the very gateway the bridge talks
to over HTTP.

The whole way by e-mail (the last test): ana's mail to `agent+shop@gw.test`,
submitted with smtplib to the gateway's SMTP listener (`smtp_listen`), starts
the session; the bridge answers; the answer comes back to ana as an e-mail of the
session's thread, through the relay (tests/fakes/smtp_relay.py)."""

from __future__ import annotations

import smtplib
import socket
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path

import anyio
import httpx
import pytest

from mailui4agents.services import email_work, identity
from mailui4agents.settings import Settings
from tests.bridge.harness import WAIT_S, Agent, Human
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, make_settings
from tests.email.conftest import link_token
from tests.fakes.smtp_relay import Relay, smtp_relay
from tests.live_app import LiveApp, live_app_here

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


MAIL_FROM = "agentmail@gw.test"
ANA = "ana@example.org"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def relay() -> Iterator[Relay]:
    with smtp_relay() as r:
        yield r


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, relay: Relay
) -> Settings:
    """E-mail on: out through the recording relay, in by the SMTP listener."""
    return make_settings(
        request,
        tmp_path,
        db_backend,
        smtp_url=relay.url,
        mail_from=MAIL_FROM,
        smtp_listen=f"127.0.0.1:{_free_port()}",
    )


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[LiveApp]:
    async with live_app_here(settings) as live:
        yield live


@pytest.fixture
async def people(served: LiveApp) -> AsyncIterator[Human]:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        admin = r.json()["token"]
        r = await http.post(
            "/api/v1/admin/users",
            json={"username": "ana", "password": USER_PASSWORD},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert r.status_code == 201, r.text
        r = await http.post(
            "/api/v1/auth/login", json={"username": "ana", "password": USER_PASSWORD}
        )
        yield Human(http, r.json()["token"], admin)


@pytest.fixture
async def agent(people: Human, served: LiveApp, tmp_path: Path) -> AsyncIterator[Agent]:
    a = await people.new_agent(tmp_path, served.url)
    try:
        yield a
    finally:
        for n, bridge in enumerate(a.bridges):
            bridge.kill()
            (tmp_path / f"bridge-{n}.log").write_text(bridge.log)


async def test_a_mail_to_agent_plus_alias_starts_a_session_the_bridge_answers(
    served: LiveApp, people: Human, agent: Agent
) -> None:
    admin = {"Authorization": f"Bearer {people.admin_token}"}
    r = await people.http.put(
        "/api/v1/admin/workspace-aliases/shop",
        json={"workspace": str(agent.workspace)},
        headers=admin,
    )
    assert r.status_code == 201, r.text
    # The bridge's start waits for its "ready" line: in a thread, since this
    # event loop serves the gateway the bridge connects to.
    await anyio.to_thread.run_sync(agent.bridge)
    found = await identity.authenticate_in(served.gateway.db, people.token)
    assert found is not None
    started = await email_work.start(
        served.gateway,
        found[0],
        agent=agent.name,
        alias="shop",
        subject="[plan] Look at the cart",
        body="Why is the total wrong?",
        email_message_id="<phone-1@example.org>",
    )
    reply = await people.wait_reply(started.session_id, started.mail_id, WAIT_S)
    assert reply["session_id"] == started.session_id
    assert f"DONE mail={started.mail_id}" in reply["body"]
    [turn] = agent.starts(started.mail_id)
    assert turn["cwd"] == str(agent.workspace)
    assert turn["mode"] == "plan"
    assert turn["headline"].startswith("NEW TASK from a human (ana")
    assert "Why is the total wrong?" in turn["prompt"]


async def _verify_ana(people: Human, relay: Relay) -> None:
    auth = {"Authorization": f"Bearer {people.token}"}
    r = await people.http.post("/api/v1/me/emails", json={"address": ANA}, headers=auth)
    assert r.status_code == 201, r.text
    [sent] = await relay.wait_async(1)
    body = sent.message.get_body(("plain",))
    assert body is not None
    r = await people.http.post(f"/verify-email/{link_token(body.get_content())}")
    assert r.status_code == 200, r.text
    relay.messages.clear()


def _submit(listen: str, msg: EmailMessage) -> None:
    host, port = listen.rsplit(":", 1)
    with smtplib.SMTP(host, int(port), timeout=30) as client:
        client.send_message(msg)


async def test_new_work_mailed_to_agent_plus_alias_is_answered_by_e_mail_in_its_thread(
    served: LiveApp, people: Human, agent: Agent, relay: Relay, settings: Settings
) -> None:
    admin = {"Authorization": f"Bearer {people.admin_token}"}
    r = await people.http.put(
        "/api/v1/admin/workspace-aliases/shop",
        json={"workspace": str(agent.workspace)},
        headers=admin,
    )
    assert r.status_code == 201, r.text
    await _verify_ana(people, relay)
    await anyio.to_thread.run_sync(agent.bridge)
    work = EmailMessage()
    work["From"] = f"Ana <{ANA}>"
    work["To"] = f"{agent.name}+shop@gw.test"
    work["Subject"] = "Look at the cart"
    work["Message-ID"] = "<phone-2@example.org>"
    work.set_content("Why is the total wrong?\n\n-- \nSent from my phone\n")
    assert settings.smtp_listen is not None
    await anyio.to_thread.run_sync(_submit, settings.smtp_listen, work)
    assert served.gateway.email_in_counts["started"] == 1, served.gateway.email_in_counts
    # The bridge's answer, e-mailed to ana: from the gateway, in the new
    # session's thread, answering the mail her e-mail became.
    [answer] = await relay.wait_async(1, WAIT_S)
    msg = answer.message
    assert answer.rcpt_tos == [ANA]
    first = str(msg["In-Reply-To"])
    assert first.startswith("<mail.") and first.endswith("@gw.test>"), first
    first_id = first.removeprefix("<mail.").split("@", 1)[0]
    r = await people.http.get(
        f"/api/v1/mail/{first_id}", headers={"Authorization": f"Bearer {people.token}"}
    )
    assert r.status_code == 200, r.text
    sid = r.json()["session_id"]
    assert str(msg["References"]).split()[0] == f"<session.{sid}@gw.test>"
    text = msg.get_body(("plain",))
    assert text is not None and f"DONE mail={first_id}" in text.get_content()
    assert str(msg["Reply-To"]).startswith("agentmail+")
    [turn] = agent.starts(first_id)
    assert turn["cwd"] == str(agent.workspace) and turn["mode"] == "workspace"
