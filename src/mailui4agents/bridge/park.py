"""Knowing when a turn is parked on a human (docs/bridge.md, "Ordering, limits, parking").

While a hook waits for a decision, the turn is *parked*: it does not count
toward ``--concurrency`` and its turn timeout pauses. The hook is a separate
process started by the agent CLI, so it tells the bridge over a Unix socket:
it connects, sends one line ``{"turn": TOKEN, "request_id": ID}`` and keeps
the connection open while it waits. The connection closing — the hook got
its answer, or died — ends the parking, so a crashed hook can never leave a
turn parked forever. Once decided, the hook may send ``news``: that ends the
parking too, and the bridge answers ``{"text": ...}`` with the mail that
reached the session meanwhile, which the hook passes to the model with the
decision (the mail is still delivered as the session's next turn).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import SocketStream, TaskGroup

logger = logging.getLogger(__name__)

MAX_LINE = 4096


@dataclass
class ParkState:
    """How many hooks of one turn are waiting on a human right now."""

    on_change: Callable[[ParkState], None] = lambda _state: None
    #: What mail reached the session while parked, for the model (see the module doc).
    news: Callable[[], Awaitable[str]] | None = None
    count: int = 0
    request_id: str | None = None
    changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def parked(self) -> bool:
        return self.count > 0

    def enter(self, request_id: str | None) -> None:
        self.count += 1
        self.request_id = request_id or self.request_id
        self._signal()

    def leave(self) -> None:
        self.count = max(0, self.count - 1)
        if not self.count:
            self.request_id = None
        self._signal()

    def _signal(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()
        self.on_change(self)


class ParkServer:
    """The socket hooks report to; turns register under a random token."""

    def __init__(self) -> None:
        # A short private folder: socket paths are limited to ~108 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="agentmail-bridge-"))
        self.path = self._dir / "park.sock"
        self.turns: dict[str, ParkState] = {}

    async def serve(self, tasks: TaskGroup) -> None:
        listener = await anyio.create_unix_listener(self.path)
        os.chmod(self.path, 0o600)

        async def run() -> None:
            async with listener:
                await listener.serve(self._handle)

        tasks.start_soon(run)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            state: ParkState | None = None
            parked = False
            buffer = b""
            try:
                while b"\n" not in buffer and len(buffer) < MAX_LINE:
                    buffer += await stream.receive(MAX_LINE)
                message = json.loads(buffer.split(b"\n", 1)[0])
                state = self.turns.get(str(message.get("turn")))
                if state is None:
                    return  # not a turn of ours (or already over): ignore
                state.enter(str(message.get("request_id") or "") or None)
                parked = True
                while True:  # parked until the hook asks for news or hangs up
                    data = await stream.receive(MAX_LINE)
                    if b"news" in data and parked:
                        parked = False
                        state.leave()
                        text = await state.news() if state.news is not None else ""
                        await stream.send((json.dumps({"text": text}) + "\n").encode())
            except (anyio.EndOfStream, anyio.BrokenResourceError, ValueError, AttributeError):
                pass
            finally:
                if state is not None and parked:
                    state.leave()
