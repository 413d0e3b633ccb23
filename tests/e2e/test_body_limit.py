"""Request bodies are limited before they are read, on a real uvicorn: a 200 MB
body to the unauthenticated login is refused at once and the gateway's memory
stays flat (it grew from 248 MB to 2 GB before), whether the size is declared
(Content-Length) or not (chunked: counted as it arrives). Uploads authenticate
before they read."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import GatewayProcess
from tests.conftest import ADMIN_PASSWORD

pytestmark = [pytest.mark.e2e]

MiB = 1024 * 1024
HUGE = 200 * MiB
CHUNK = b"x" * MiB


def status_kib(pid: int, key: str) -> int:
    """A memory figure of the process (VmRSS, VmHWM = peak RSS) from /proc, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{key} not in /proc/{pid}/status")


def push(port: int, head: bytes, chunks: Iterator[bytes], deadline_s: float = 20) -> bytes:
    """Send `head`, then body chunks until the server answers or closes; return
    what it answered. Stops sending as soon as an answer is readable."""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as sock:
        sock.sendall(head)
        for chunk in chunks:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer = b""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer and answer.rstrip().endswith(b"}"):
                break
        return answer


def chunked(total: int) -> Iterator[bytes]:
    for _ in range(total // len(CHUNK)):
        yield b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
    yield b"0\r\n\r\n"


def plain(total: int) -> Iterator[bytes]:
    for _ in range(total // len(CHUNK)):
        yield CHUNK


def head(path: str, *lines: str) -> bytes:
    return "\r\n".join([f"POST {path} HTTP/1.1", "Host: gw", *lines]).encode() + b"\r\n\r\n"


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_200_mb_login_body_is_refused_at_once_and_memory_stays_flat(
    gateway_process: GatewayProcess,
) -> None:
    pid = gateway_process.proc.pid if gateway_process.proc else 0
    port = gateway_process.port
    peak_before = status_kib(pid, "VmHWM")
    json_type = "Content-Type: application/json"
    cases = [
        (head("/api/v1/auth/login", json_type, f"Content-Length: {HUGE}"), plain(HUGE)),
        (head("/api/v1/auth/login", json_type, "Transfer-Encoding: chunked"), chunked(HUGE)),
    ] * 2
    for request, body in cases:
        started = time.monotonic()
        answer = push(port, request, body)
        took = time.monotonic() - started
        assert status_of(answer) == 413, answer[:300]
        assert b'"code": "too_large"' in answer and b'"field": "body"' in answer
        # Far less than sending 200 MB; generous for a loaded 2-core machine.
        assert took < 10, took
    growth_mib = (status_kib(pid, "VmHWM") - peak_before) / 1024
    assert growth_mib < 50, f"peak RSS grew {growth_mib:.0f} MiB"
    # The other side: an ordinary login still works on the same gateway.
    r = httpx.post(
        f"{gateway_process.url}/api/v1/auth/login",
        json={"username": "admin", "password": ADMIN_PASSWORD},
        timeout=30,
    )
    assert r.status_code == 200, r.text


def test_an_upload_authenticates_before_it_reads_its_body(
    gateway_process: GatewayProcess,
) -> None:
    pid = gateway_process.proc.pid if gateway_process.proc else 0
    peak_before = status_kib(pid, "VmHWM")
    multipart = "Content-Type: multipart/form-data; boundary=b"
    # No token: 401 while the body is still arriving (not 413 after reading it).
    answer = push(
        gateway_process.port,
        head("/api/v1/attachments", multipart, "Transfer-Encoding: chunked"),
        chunked(HUGE),
    )
    assert status_of(answer) == 401, answer[:300]
    # Declared larger than the attachment limit: 413 before anything else.
    answer = push(
        gateway_process.port,
        head("/api/v1/attachments", multipart, f"Content-Length: {HUGE}"),
        plain(HUGE),
    )
    assert status_of(answer) == 413, answer[:300]
    assert (status_kib(pid, "VmHWM") - peak_before) / 1024 < 50
