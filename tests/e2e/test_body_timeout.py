"""A request body must arrive whole within `body_timeout_s` of its header (here
1 s) on a real `agentmail serve`: a client that stalls after the header, or
dribbles its body a byte at a time, is closed; one that sends its body in time is
answered, and so is a bodiless request after the body timeout has passed
(src/mailui4agents/http_protocol.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD
from tests.e2e.raw_http import HEALTHZ, recv_until
from tests.e2e.test_header_timeout import DEADLINE_S, closed_within

pytestmark = [pytest.mark.e2e]

BODY_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
        AGENTMAIL_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
        **FAST_HASH_ENV,
    )
    gp = GatewayProcess(data_dir=tmp_path_factory.mktemp("gw") / "data", env=env)
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


LOGIN_HEAD = (
    b"POST /api/v1/auth/login HTTP/1.1\r\nHost: gw\r\n"
    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
)


def test_a_body_that_stalls_after_its_header_is_closed(gateway: GatewayProcess) -> None:
    socks = [socket.create_connection(("127.0.0.1", gateway.port)) for _ in range(10)]
    try:
        for i, s in enumerate(socks):
            s.sendall(LOGIN_HEAD + (b'{"username": ' if i % 2 else b""))
        took = closed_within(socks, DEADLINE_S)
        assert len(took) == 10
        assert min(took) >= BODY_TIMEOUT_S * 0.5, took  # by the timer, not at once
    finally:
        for s in socks:
            s.close()


def test_a_body_dribbled_a_byte_at_a_time_is_closed(gateway: GatewayProcess) -> None:
    """Each byte comes well inside the header timeout: only a deadline on the
    whole body ends it. The dribble is paced by the server's own silence
    (select with a timeout), so it stops as soon as the server closes."""
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        s.sendall(LOGIN_HEAD)
        start = time.monotonic()
        closed = False
        while time.monotonic() - start < DEADLINE_S:
            try:
                s.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            s.settimeout(0.2)
            try:
                if s.recv(4096) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except ConnectionResetError:
                closed = True
                break
        took = time.monotonic() - start
        assert closed, f"still open after {took:.1f}s of dribbling"
        assert took >= BODY_TIMEOUT_S * 0.5, took


def test_a_body_sent_in_time_is_answered_and_a_later_request_too(
    gateway: GatewayProcess,
) -> None:
    body = b'{"username": "admin", "password": "wrong-password"}'
    head = (
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=DEADLINE_S) as s:
        s.sendall(head + body)
        assert recv_until(s, b"}}").startswith(b"HTTP/1.1 401")
        # Past the body timeout on the same connection: the timer went with the body.
        s.settimeout(BODY_TIMEOUT_S * 1.5)
        with pytest.raises(TimeoutError):
            s.recv(1)  # nothing comes and the connection stays open meanwhile
        s.settimeout(DEADLINE_S)
        s.sendall(HEALTHZ)
        assert recv_until(s, b'"ok"').startswith(b"HTTP/1.1 200")
