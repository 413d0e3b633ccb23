"""Tell the bridge that this hook is waiting on a human
(docs/bridge.md, "Ordering, limits, parking").

A mail-driven turn's hook gets ``AGENTMAIL_BRIDGE_SOCKET`` and
``AGENTMAIL_BRIDGE_TURN`` from the bridge. While the hook waits for a decision
it holds a connection to that socket open, so the bridge does not count the
turn toward its concurrency and pauses the turn's timeout. Best effort and
never in the way: without the variables, or when the bridge cannot be
reached, the hook simply waits.

Blocking sockets of the standard library: the hook's ask path imports no event
loop (hooks/gateway.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

CONNECT_TIMEOUT_S = 1.0


# The bridge answers after one inbox read of the gateway; on 2 busy cores (load
# 4+) that once took longer than the 2 s this was, and the model never heard of
# the correction that arrived while it waited (tests/bridge/test_crash_and_pool.py).
NEWS_TIMEOUT_S = 6.0
MAX_NEWS_CHARS = 1500


class Parking:
    """The connection to the bridge while parked (None: no bridge to tell)."""

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock

    def news(self) -> str:
        """Once decided: what mail reached the session meanwhile ("" if none or no bridge).

        Asking also ends the parking. Never raises and waits at most NEWS_TIMEOUT_S."""
        if self.sock is None:
            return ""
        buffer = b""
        try:
            self.sock.settimeout(NEWS_TIMEOUT_S)
            self.sock.sendall(b"news\n")
            while b"\n" not in buffer and len(buffer) < 64 * 1024:
                data = self.sock.recv(65536)
                if not data:
                    return ""
                buffer += data
            text = json.loads(buffer.split(b"\n", 1)[0]).get("text")
        except (OSError, ValueError, AttributeError):  # TimeoutError is an OSError
            return ""
        return str(text)[:MAX_NEWS_CHARS] if text else ""


@contextmanager
def parked(env: Mapping[str, str], request_id: str) -> Iterator[Parking]:
    """Hold the bridge's park socket open for the duration of the block."""
    path, token = env.get("AGENTMAIL_BRIDGE_SOCKET"), env.get("AGENTMAIL_BRIDGE_TURN")
    sock: socket.socket | None = None
    if path and token:
        line = json.dumps({"turn": token, "request_id": request_id}) + "\n"
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(path)
            sock.sendall(line.encode())
        except OSError:  # no bridge to tell: simply wait (best effort, silent)
            if sock is not None:
                sock.close()
            sock = None
    try:
        yield Parking(sock)
    finally:
        if sock is not None:
            sock.close()
