"""The real app under real uvicorn (127.0.0.1, port 0) in a thread of this test
process: real HTTP and SSE like a gateway subprocess, yet the test can reach the
gateway's engines (to count queries) and settings."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import uvicorn
from fastapi import FastAPI

from mailui4agents.app import create_app
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway


class _ReadyServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self._on_ready = on_ready

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()
            if self._on_ready is not None:
                self._on_ready()


@dataclass
class LiveApp:
    url: str
    app: FastAPI

    @property
    def gateway(self) -> Gateway:
        gw: Gateway = self.app.state.gateway
        return gw


def _config(app: Any, lifespan: Literal["auto", "on", "off"]) -> uvicorn.Config:
    return uvicorn.Config(
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


def _url(server: uvicorn.Server) -> str:
    assert server.started, "uvicorn failed to start"
    return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


@contextmanager
def uvicorn_thread(
    app: Any, *, lifespan: Literal["auto", "on", "off"], start_timeout: float = 30
) -> Iterator[str]:
    """Serve `app` with a real uvicorn on 127.0.0.1 (port 0) in a thread; yields its URL."""
    server = _ReadyServer(_config(app, lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.ready.wait(timeout=start_timeout), "uvicorn did not start"
        yield _url(server)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def live_app(settings: Settings) -> Iterator[LiveApp]:
    app = create_app(settings)
    with uvicorn_thread(app, lifespan="on") as url:
        yield LiveApp(url, app)


@asynccontextmanager
async def live_app_here(settings: Settings, start_timeout: float = 30) -> AsyncIterator[LiveApp]:
    """`live_app` served in the calling test's own event loop: the test may await
    the gateway's services directly, on the loop that serves its HTTP."""
    app = create_app(settings)
    ready = anyio.Event()
    server = _ReadyServer(_config(app, "on"), on_ready=ready.set)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(start_timeout):
            await ready.wait()
        try:
            yield LiveApp(_url(server), app)
        finally:
            server.should_exit = True
