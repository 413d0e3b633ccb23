"""Tell the bridge that this hook is waiting on a human (docs/bridge.md, "Parking").

A mail-driven turn's hook gets ``AGENTMAIL_BRIDGE_SOCKET`` and
``AGENTMAIL_BRIDGE_TURN`` from the bridge. While the hook waits for a decision
it holds a connection to that socket open, so the bridge does not count the
turn toward its concurrency and pauses the turn's timeout. Best effort and
never in the way: without the variables, or when the bridge cannot be
reached, the hook simply waits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio
from anyio.abc import SocketStream

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0


NEWS_TIMEOUT_S = 2.0
MAX_NEWS_CHARS = 1500


class Parking:
    """The connection to the bridge while parked (None: no bridge to tell)."""

    def __init__(self, stream: SocketStream | None) -> None:
        self.stream = stream

    async def news(self) -> str:
        """Once decided: what mail reached the session meanwhile ("" if none or no bridge).

        Asking also ends the parking. Never raises and waits at most NEWS_TIMEOUT_S."""
        if self.stream is None:
            return ""
        buffer = b""
        try:
            with anyio.fail_after(NEWS_TIMEOUT_S):
                await self.stream.send(b"news\n")
                while b"\n" not in buffer and len(buffer) < 64 * 1024:
                    buffer += await self.stream.receive()
            text = json.loads(buffer.split(b"\n", 1)[0]).get("text")
        except (OSError, TimeoutError, ValueError, AttributeError, anyio.EndOfStream,
                anyio.BrokenResourceError):  # fmt: skip
            return ""
        return str(text)[:MAX_NEWS_CHARS] if text else ""


@asynccontextmanager
async def parked(env: Mapping[str, str], request_id: str) -> AsyncIterator[Parking]:
    """Hold the bridge's park socket open for the duration of the block."""
    path, token = env.get("AGENTMAIL_BRIDGE_SOCKET"), env.get("AGENTMAIL_BRIDGE_TURN")
    stream: SocketStream | None = None
    if path and token:
        line = json.dumps({"turn": token, "request_id": request_id}) + "\n"
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                stream = await anyio.connect_unix(path)
                await stream.send(line.encode())
        except (OSError, TimeoutError, anyio.BrokenResourceError) as exc:
            logger.info("could not tell the bridge this hook is parked: %s", exc)
            stream = None
    try:
        yield Parking(stream)
    finally:
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
