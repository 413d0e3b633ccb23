"""The real app under real uvicorn (127.0.0.1, port 0) in a thread of this test
process: real HTTP and SSE like a gateway subprocess, yet the test can reach the
gateway's engines (to count queries) and settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI

from mailui4agents.app import create_app
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway


class _ReadyServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


@dataclass
class LiveApp:
    url: str
    app: FastAPI

    @property
    def gateway(self) -> Gateway:
        gw: Gateway = self.app.state.gateway
        return gw


@contextmanager
def uvicorn_thread(
    app: Any, *, lifespan: Literal["auto", "on", "off"], start_timeout: float = 30
) -> Iterator[str]:
    """Serve `app` with a real uvicorn on 127.0.0.1 (port 0) in a thread; yields its URL."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="critical",
        lifespan=lifespan,
        ws="none",
        http="h11",
        loop="asyncio",
        timeout_graceful_shutdown=2,
    )
    server = _ReadyServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.ready.wait(timeout=start_timeout), "uvicorn did not start"
        assert server.started, "uvicorn failed to start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def live_app(settings: Settings) -> Iterator[LiveApp]:
    app = create_app(settings)
    with uvicorn_thread(app, lifespan="on") as url:
        yield LiveApp(url, app)
