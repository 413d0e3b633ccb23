"""New work by e-mail reaches a real bridge: services/email_work.start (what
the inbound e-mail path calls for a mail to `agent+shop@…`) starts a session in
the alias's workspace, and a real `agentmail bridge` with the command runner
answers in that session. The gateway is real uvicorn on 127.0.0.1 in this test's
own event loop, so the test calls start() on the very gateway the bridge talks
to over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from mailui4agents.app import create_app
from mailui4agents.services import email_work, identity
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.bridge.harness import WAIT_S, Agent, Human
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class _ReadyServer(uvicorn.Server):
    """uvicorn, telling when its startup (listening, lifespan) is over."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


class Served:
    def __init__(self, url: str, gateway: Gateway) -> None:
        self.url = url
        self.gateway = gateway


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[Served]:
    app = create_app(settings)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, lifespan="on", log_level="warning",
        loop="asyncio", http="h11", ws="none", timeout_graceful_shutdown=2,
    )  # fmt: skip
    server = _ReadyServer(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(30):
            await server.ready.wait()
        assert server.started, "uvicorn failed to start"
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield Served(f"http://127.0.0.1:{port}", app.state.gateway)
        finally:
            server.should_exit = True


@pytest.fixture
async def people(served: Served) -> AsyncIterator[Human]:
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
async def agent(people: Human, served: Served, tmp_path: Path) -> AsyncIterator[Agent]:
    a = await people.new_agent(tmp_path, served.url)
    try:
        yield a
    finally:
        for n, bridge in enumerate(a.bridges):
            bridge.kill()
            (tmp_path / f"bridge-{n}.log").write_text(bridge.log)


async def test_a_mail_to_agent_plus_alias_starts_a_session_the_bridge_answers(
    served: Served, people: Human, agent: Agent
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
