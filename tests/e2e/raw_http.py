"""Plain-socket HTTP/1.1 for the tests that must see what the server does with
the bytes themselves (timeouts, header bounds, keep-alive)."""

from __future__ import annotations

import socket

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"


def recv_until(sock: socket.socket, marker: bytes) -> bytes:
    """What the server sends until `marker` is in it; fails if it closes first."""
    got = b""
    while marker not in got:
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    return got
