"""`agentmail serve` on a fresh data dir: the first admin, health and readiness."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env

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
