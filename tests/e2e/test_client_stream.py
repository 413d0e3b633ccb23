"""The Python client's event stream against a real gateway that dies and comes
back: nothing is lost and nothing is repeated."""

from __future__ import annotations

from contextlib import aclosing

import anyio
import pytest

from mailui4agents.client import AsyncClient, ClientConfig
from mailui4agents.testing import GatewayProcess
from tests.conftest import Api

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_client_resumes_after_a_gateway_crash_without_loss_or_repeat(
    gateway_process: GatewayProcess, live: Api
) -> None:
    key = await live.agent("claude")
    await live.user("ana")
    connected = anyio.Event()
    connects = 0

    def on_connect() -> None:
        nonlocal connects
        connects += 1
        connected.set()

    config = ClientConfig(url=gateway_process.url, key=key)
    got: list[str] = []
    async with AsyncClient(config, reconnect_initial=0.05, reconnect_cap=0.5) as client:
        stream = client.events(on_connect=on_connect)
        async with aclosing(stream):
            with anyio.fail_after(60):

                async def reader() -> None:
                    async for event in stream:
                        if event.type == "new_mail":
                            got.append(event.data["subject"])
                            if len(got) == 3:
                                return

                async with anyio.create_task_group() as tg:
                    tg.start_soon(reader)
                    await connected.wait()
                    assert (
                        await live.send("ana", ["claude@/srv/a"], subject="one")
                    ).status_code == 201
                    # Crash and come back on the same port; the client reconnects alone.
                    port = gateway_process.port
                    gateway_process.kill()
                    gateway_process.start(port=port)
                    for subject in ("two", "three"):
                        r = await live.send("ana", ["claude@/srv/a"], subject=subject)
                        assert r.status_code == 201
    assert got == ["one", "two", "three"]
    assert connects >= 2
