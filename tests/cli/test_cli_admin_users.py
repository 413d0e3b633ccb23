"""``agentmail user admin`` and ``agentmail user password``: the real console
script against a real gateway (``shared_gateway``; each test with people of its
own, the admin's login untouched)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import httpx
import pytest
from tests.cli.test_cli_devices import cli, env_of
from tests.conftest import USER_PASSWORD, Api, admin_api

from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

_PEOPLE = count(1)
NEW_PASSWORD = "a-new-password-for-tests"


@pytest.fixture
async def live(shared_gateway: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(shared_gateway.url) as a:
        yield a


@pytest.fixture
def n() -> int:
    return next(_PEOPLE)


async def _is_admin(live: Api, name: str) -> bool:
    r = await live.http.get("/api/v1/admin/users", headers=live.auth("admin"))
    return any(u["is_admin"] for u in r.json()["items"] if u["username"] == name)


async def _can_login(live: Api, name: str, password: str) -> bool:
    r = await live.http.post("/api/v1/auth/login", json={"username": name, "password": password})
    return r.status_code == 200


async def test_user_admin_makes_and_revokes_an_admin_for_admins_only(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    ana, bob = f"ana-{n}", f"bob-{n}"
    await live.user(ana)
    bob_env = env_of(shared_gateway, await live.user(bob), tmp_path / "bob")
    refused = await cli(bob_env, "user", "admin", ana)
    assert refused.returncode == 1 and "admins only" in refused.stderr.decode()
    assert not await _is_admin(live, ana)

    admin_env = env_of(shared_gateway, live.tokens["admin"], tmp_path / "admin")
    made = await cli(admin_env, "user", "admin", ana)
    assert made.returncode == 0, made.stderr.decode()
    assert f"{ana} is an administrator." in made.stdout.decode()
    assert await _is_admin(live, ana)
    revoked = await cli(admin_env, "user", "admin", ana, "--revoke")
    assert revoked.returncode == 0, revoked.stderr.decode()
    assert f"{ana} is no administrator." in revoked.stdout.decode()
    assert not await _is_admin(live, ana)

    unknown = await cli(admin_env, "user", "admin", f"nobody-{n}")
    assert unknown.returncode == 1 and "not found" in unknown.stderr.decode()


async def test_user_password_sets_a_new_one_and_ends_the_users_logins(
    live: Api, shared_gateway: GatewayProcess, n: int, tmp_path: Path
) -> None:
    bob = f"bob-{n}"
    bob_token = await live.user(bob)
    admin_env = env_of(shared_gateway, live.tokens["admin"], tmp_path / "admin")
    short = await cli(admin_env, "user", "password", bob, "--password", "short")
    assert short.returncode == 1 and "password" in short.stderr.decode()
    assert await _can_login(live, bob, USER_PASSWORD)

    done = await cli(admin_env, "user", "password", bob, "--password", NEW_PASSWORD)
    assert done.returncode == 0, done.stderr.decode()
    assert f"New password set for {bob}" in done.stdout.decode()
    assert not await _can_login(live, bob, USER_PASSWORD)
    assert await _can_login(live, bob, NEW_PASSWORD)
    async with httpx.AsyncClient(base_url=shared_gateway.url, timeout=30) as http:
        bearer = {"Authorization": f"Bearer {bob_token}"}
        old = await http.get("/api/v1/auth/tokens", headers=bearer)
    assert old.status_code == 401  # bob's login before the reset ended
