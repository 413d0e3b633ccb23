"""X-Forwarded-For is believed only from the proxies `agentmail serve
--forwarded-allow-ips` names. uvicorn believed it from 127.0.0.1 by default, so
a local client could name a new address per attempt and dodge the per-address
login limit (src/mailui4agents/cli/serve.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD

pytestmark = [pytest.mark.e2e]

PER_ADDRESS = 3  # failed logins one address may have per window


def gateway(tmp_path: Path, *args: str) -> Iterator[GatewayProcess]:
    env = clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
        AGENTMAIL_LOGIN_FAILURES_PER_ADDRESS=str(PER_ADDRESS),
        **FAST_HASH_ENV,
    )
    gp = GatewayProcess(data_dir=tmp_path / "data", env=env, extra_args=list(args))
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


def flood(gp: GatewayProcess, forwarded_for: list[str]) -> list[int]:
    """A failed login per X-Forwarded-For value (each for a new username, so the
    per-username limit never counts): the statuses."""
    with httpx.Client(base_url=gp.url, timeout=30) as http:
        return [
            http.post(
                "/api/v1/auth/login",
                json={"username": f"nobody{i}", "password": "wrong-password"},
                headers={"X-Forwarded-For": xff},
            ).status_code
            for i, xff in enumerate(forwarded_for)
        ]


def test_by_default_a_changing_x_forwarded_for_does_not_dodge_the_address_limit(
    tmp_path: Path,
) -> None:
    for gp in gateway(tmp_path):
        statuses = flood(gp, [f"203.0.113.{i}" for i in range(PER_ADDRESS + 3)])
        assert statuses[:PER_ADDRESS] == [401] * PER_ADDRESS, statuses
        assert set(statuses[PER_ADDRESS:]) == {429}, statuses


def test_from_a_named_proxy_the_forwarded_address_is_the_one_limited(tmp_path: Path) -> None:
    for gp in gateway(tmp_path, "--forwarded-allow-ips", "127.0.0.1"):
        # Each forwarded client its own address: none reaches the limit ...
        assert set(flood(gp, [f"203.0.113.{i}" for i in range(PER_ADDRESS + 3)])) == {401}
        # ... and one forwarded client is limited on its own address.
        statuses = flood(gp, ["198.51.100.7"] * (PER_ADDRESS + 1))
        assert statuses == [401] * PER_ADDRESS + [429], statuses
