"""`agentmail serve` on a fresh data dir: the first admin, health and readiness."""

from __future__ import annotations

import re
import select
import socket
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.e2e.raw_http import HEALTHZ, recv_until

pytestmark = [pytest.mark.e2e]


def test_first_start_prints_a_generated_admin_password_once_and_it_works(
    tmp_path: Path,
) -> None:
    gw = GatewayProcess(data_dir=tmp_path / "data", env=clean_env(**FAST_HASH_ENV))
    gw.start()
    try:
        printed = re.findall(r"password: (\S+)", "".join(gw.output))
        assert len(printed) == 1
        r = httpx.post(
            f"{gw.url}/api/v1/auth/login",
            json={"username": "admin", "password": printed[0]},
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["user"]["is_admin"] is True
        assert httpx.get(f"{gw.url}/healthz", timeout=30).json() == {"status": "ok"}
        ready = httpx.get(f"{gw.url}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
    finally:
        gw.stop()
    gw.output.clear()
    gw.start()  # the same data dir: the admin exists, nothing is printed again
    try:
        assert "password:" not in "".join(gw.output)
    finally:
        gw.stop()


def test_admin_password_from_the_environment_is_used(tmp_path: Path) -> None:
    env = clean_env(AGENTMAIL_ADMIN_PASSWORD="chosen-password-123", **FAST_HASH_ENV)
    gw = GatewayProcess(data_dir=tmp_path / "data", env=env)
    gw.start()
    try:
        assert "password:" not in "".join(gw.output)
        r = httpx.post(
            f"{gw.url}/api/v1/auth/login",
            json={"username": "admin", "password": "chosen-password-123"},
            timeout=30,
        )
        assert r.status_code == 200
    finally:
        gw.stop()


def test_an_idle_kept_alive_connection_outlives_the_clients_keep_alive(
    gateway_process: GatewayProcess,
) -> None:
    # httpx keeps an idle connection 5 s and then reuses it: a server closing at
    # the same 5 s (uvicorn's default) raced, and a POST was lost with ReadError.
    # The gateway closes idle ones at header_timeout_s (10 s).
    expiry = httpx.Limits().keepalive_expiry
    assert expiry is not None
    with socket.create_connection(("127.0.0.1", gateway_process.port), timeout=30) as s:
        s.sendall(HEALTHZ)
        recv_until(s, b'"ok"')
        # Nothing may arrive (a close reads as b"") within the client's expiry + 1 s.
        ready, _, _ = select.select([s], [], [], expiry + 1)
        assert not ready, s.recv(4096)
        s.sendall(HEALTHZ)
        assert recv_until(s, b'"ok"').startswith(b"HTTP/1.1 200")
