"""One real gateway shared by the hook tests of this package (starting one per
test would dominate the run time); each test works in its own new session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD
from tests.hooks.harness import HookRun, Human, hook_env, run_hook


@dataclass
class World:
    """The shared gateway, its principals, and a home dir for the hooks."""

    gateway: GatewayProcess
    tokens: dict[str, str]
    home: Path
    data_dir: Path
    workdir: Path

    @property
    def url(self) -> str:
        return self.gateway.url

    def env(self, agent: str = "claude", **extra: str) -> dict[str, str]:
        """The hook's environment; `extra` may override any of it (AGENTMAIL_KEY too)."""
        return {**hook_env(self.url, self.tokens[agent], self.home, self.data_dir), **extra}

    async def hook(self, platform: str, payload: dict[str, Any] | str, **env: str) -> HookRun:
        return await run_hook(platform, payload, self.env(**env), self.workdir)


def make_principals(url: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    with httpx.Client(base_url=url, timeout=30) as http:

        def login(name: str, password: str) -> None:
            r = http.post("/api/v1/auth/login", json={"username": name, "password": password})
            assert r.status_code == 200, r.text
            tokens[name] = r.json()["token"]

        login("admin", ADMIN_PASSWORD)
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        for user in ("ana", "bob"):
            r = http.post(
                "/api/v1/admin/users",
                json={"username": user, "password": USER_PASSWORD},
                headers=admin,
            )
            assert r.status_code == 201, r.text
            login(user, USER_PASSWORD)
        for agent in ("claude", "pi"):
            # ana owns the agents (terminal sessions are decided by an owner);
            # bob is a tasker; both may set them to work anywhere, in any mode.
            team = {
                "name": agent,
                "owners": ["admin", "ana"],
                "taskers": ["bob"],
                "workspaces": ["/**"],
                "max_mode": {"owners": "full", "taskers": "full"},
            }
            r = http.post("/api/v1/admin/agents", json=team, headers=admin)
            assert r.status_code == 201, r.text
            tokens[agent] = r.json()["key"]
    return tokens


def start_world(tmp: Path) -> World:
    data_dir = tmp / "data"
    # Every hook test starts sessions as ana on one shared gateway: the session
    # rate limit (tested in tests/api/test_rate_limit.py) must not depend on how
    # fast the suite runs.
    env = clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, AGENTMAIL_SESSION_RATE_LIMIT="100000",
        **FAST_HASH_ENV,
    )  # fmt: skip
    gateway = GatewayProcess(data_dir=data_dir, env=env)
    gateway.start()
    home, workdir = tmp / "home", tmp / "work"
    home.mkdir()
    workdir.mkdir()
    try:
        tokens = make_principals(gateway.url)
    except BaseException:
        gateway.stop()
        raise
    return World(gateway, tokens, home, data_dir, workdir)


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = start_world(tmp_path_factory.mktemp("hooks"))
    try:
        yield w
    finally:
        w.gateway.stop()


@pytest.fixture
def own_world(tmp_path: Path) -> Iterator[World]:
    """A gateway for this test alone (for tests that stop it)."""
    w = start_world(tmp_path)
    try:
        yield w
    finally:
        w.gateway.stop()


@pytest.fixture
async def human(world: World) -> AsyncIterator[Human]:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as http:
        yield Human(http, world.tokens)
