"""Half-open connections are closed: one that sends nothing, or only part of a
request header, is closed after `header_timeout_s` (here 1 s) by a real
`agentmail serve`; one that sends its request in time is answered. A request
header over 16 KiB is answered 431 and closed, whole or still incomplete; a large
body is not a large header (src/mailui4agents/http_protocol.py)."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD
from tests.e2e.raw_http import HEALTHZ, recv_until

pytestmark = [pytest.mark.e2e]

TIMEOUT_S = 1.0
DEADLINE_S = 8.0  # well past the timeout, far below the 60 s the probe saw


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
        AGENTMAIL_HEADER_TIMEOUT_S=str(TIMEOUT_S),
        AGENTMAIL_SSE_PING_S="0.3",
        **FAST_HASH_ENV,
    )
    gp = GatewayProcess(data_dir=tmp_path_factory.mktemp("gw") / "data", env=env)
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


def closed_within(socks: list[socket.socket], seconds: float) -> list[float]:
    """Wait (on the sockets, no sleeps) until each is closed by the server; the
    seconds each took. Fails if one is still open at the deadline."""
    start = time.monotonic()
    open_ = {s.fileno(): s for s in socks}
    took: list[float] = []
    while open_:
        left = start + seconds - time.monotonic()
        assert left > 0, f"{len(open_)} of {len(socks)} connections still open after {seconds}s"
        ready, _, _ = select.select(list(open_.values()), [], [], left)
        for s in ready:
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            if not data:
                took.append(time.monotonic() - start)
                del open_[s.fileno()]
    return took


def test_silent_and_half_sent_connections_are_closed_after_the_header_timeout(
    gateway: GatewayProcess,
) -> None:
    socks = [socket.create_connection(("127.0.0.1", gateway.port)) for _ in range(40)]
    try:
        for i, s in enumerate(socks):
            if i % 2:  # half a header: a request line and one header, no blank line
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n")
        took = closed_within(socks, DEADLINE_S)
        assert len(took) == 40
        assert min(took) >= TIMEOUT_S * 0.5, took  # closed by the timer, not at once
    finally:
        for s in socks:
            s.close()


def test_a_request_sent_in_time_is_answered_and_the_idle_connection_then_closed(
    gateway: GatewayProcess,
) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=DEADLINE_S) as s:
        s.sendall(HEALTHZ)
        assert recv_until(s, b'"ok"').startswith(b"HTTP/1.1 200")
        # Then a second request header that never ends: closed too.
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert len(closed_within([s], DEADLINE_S)) == 1


def test_a_stream_open_longer_than_the_header_timeout_is_not_cut(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, timeout=DEADLINE_S) as http:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        token = http.post("/api/v1/auth/login", json=login).json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        key = http.post("/api/v1/admin/agents", json={"name": "claude"}, headers=auth).json()["key"]
        started = time.monotonic()
        pings = 0
        with http.stream(
            "GET", "/api/v1/agent/events", headers={"Authorization": f"Bearer {key}"}
        ) as r:
            assert r.status_code == 200
            for line in r.iter_lines():  # the pings are the events waited on
                pings += line.startswith(": ping")
                if time.monotonic() - started > 3 * TIMEOUT_S:
                    break
        assert pings >= 3, pings


def answer_to(port: int, raw: bytes) -> bytes:
    """Send `raw` at once; everything the server answers until it closes or has
    answered every request sent (one `HTTP/1.1` status line each)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as s:
        s.sendall(raw)
        wanted = raw.count(b" HTTP/1.1\r\n")
        got = b""
        while got.count(b"HTTP/1.1 ") < wanted or not got.endswith((b"}", b"large")):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def request(pad: int, *, body: bytes = b"", method: str = "GET", path: str = "/healthz") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: gw\r\nX-Pad: {'a' * pad}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def test_a_header_under_16_kib_is_answered(gateway: GatewayProcess) -> None:
    assert answer_to(gateway.port, request(15 * 1024)).startswith(b"HTTP/1.1 200")


def test_a_header_over_16_kib_is_refused_431_whole_or_incomplete(
    gateway: GatewayProcess,
) -> None:
    whole = answer_to(gateway.port, request(17 * 1024))
    assert whole.startswith(b"HTTP/1.1 431"), whole[:80]
    # Never finished (no blank line), 40 KiB of it: refused at once, not at the timeout.
    started = time.monotonic()
    incomplete = answer_to(gateway.port, request(40 * 1024)[:-2])
    assert incomplete.startswith(b"HTTP/1.1 431"), incomplete[:80]
    assert time.monotonic() - started < TIMEOUT_S


def test_a_large_body_is_not_a_large_header(gateway: GatewayProcess) -> None:
    # 200 KiB of JSON (within the body limit) behind a small header: the app reads
    # it and answers the login (401). Then, on the same connection, the next
    # request's header in two writes: answered (200), no 431.
    body = b'{"username": "' + b"a" * (200 * 1024) + b'", "password": "x"}'
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=DEADLINE_S) as s:
        s.sendall(request(10, body=body, method="POST", path="/api/v1/auth/login"))
        got = recv_until(s, b"wrong username or password")
        assert got.startswith(b"HTTP/1.1 401"), got[:80]
        next_request = request(10)
        s.sendall(next_request[:20])
        got = b""
        while b'"ok"' not in got and not got.startswith(b"HTTP/1.1 431"):
            ready, _, _ = select.select([s], [], [], 0.2)
            if not ready and next_request:  # nothing back for the first half: the rest
                s.sendall(next_request[20:])
                next_request = b""
                continue
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got[:80]


def test_pipelined_requests_are_each_answered(gateway: GatewayProcess) -> None:
    got = answer_to(gateway.port, request(10) * 3)
    assert got.count(b"HTTP/1.1 200") == 3, got
