"""Login attempts are limited per username and per client address (429 with
Retry-After, in the one error shape), a correct password over the limit is
refused too until the window lets go, and the Argon2 check holds no write
transaction (services/rate_limits.py, api/auth.py)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI

from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, fast_settings, started_app

pytestmark = pytest.mark.anyio

WINDOW_S = 900.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    app: FastAPI
    gw: Gateway
    clock: Clock
    api: Api  # from address 10.0.0.1

    def client(self, address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=(address, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://gw")


def limits(tmp_path: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "login_window_s": WINDOW_S,
        "login_failures_per_user": 3,
        "login_failures_per_address": 50,
        "login_attempts_per_address": 300,
    }
    return fast_settings(tmp_path, **{**base, **overrides})


async def start(settings: Settings) -> AsyncIterator[World]:
    async with started_app(settings) as app:
        gw: Gateway = app.state.gateway
        clock = Clock()
        gw.logins.set_clock(clock)
        transport = httpx.ASGITransport(app=app, client=("10.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            world = World(app, gw, clock, Api(http))
            await world.api.login("admin", ADMIN_PASSWORD)
            yield world


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for w in start(limits(tmp_path)):
        yield w


async def login(http: httpx.AsyncClient, username: str, password: str) -> httpx.Response:
    return await http.post("/api/v1/auth/login", json={"username": username, "password": password})


def assert_limited(r: httpx.Response) -> int:
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err["code"] == "rate_limited"
    retry = int(r.headers["Retry-After"])
    assert 1 <= retry <= WINDOW_S and err["retry_after"] == retry
    return retry


async def test_wrong_passwords_for_one_user_are_limited_even_the_right_one_then(
    world: World,
) -> None:
    api = world.api
    await api.user("ana")
    await api.user("bob")
    for _ in range(3):
        r = await login(api.http, "ana", "wrong-password")
        assert r.status_code == 401, r.text
    assert_limited(await login(api.http, "ana", "wrong-password"))
    world.clock.now += 60
    retry = assert_limited(await login(api.http, "ana", USER_PASSWORD))  # right, still refused
    assert retry == WINDOW_S - 60
    # another user from the same address is not held by ana's limit
    assert (await login(api.http, "bob", USER_PASSWORD)).status_code == 200
    # once the window lets the oldest failure go, the right password works again
    world.clock.now += retry
    assert (await login(api.http, "ana", USER_PASSWORD)).status_code == 200


async def test_a_successful_login_does_not_count_as_a_failure(world: World) -> None:
    api = world.api
    await api.user("ana")
    for _ in range(5):  # more than the 3 failures allowed
        assert (await login(api.http, "ana", USER_PASSWORD)).status_code == 200
    assert (await login(api.http, "ana", "wrong-password")).status_code == 401


async def test_failures_from_one_address_limit_every_username_from_it_but_not_elsewhere(
    tmp_path: Path,
) -> None:
    settings = limits(tmp_path, login_failures_per_user=100, login_failures_per_address=5)
    async for world in start(settings):
        await world.api.user("bob")
        async with world.client("10.0.0.2") as attacker, world.client("10.0.0.3") as other:
            for i in range(5):  # a different username each time: a spray
                r = await login(attacker, f"user{i}", "wrong-password")
                assert r.status_code == 401, r.text
            assert_limited(await login(attacker, "user-new", "wrong-password"))
            assert_limited(await login(attacker, "bob", USER_PASSWORD))
            assert (await login(other, "bob", USER_PASSWORD)).status_code == 200


async def test_all_logins_from_one_address_are_limited_too(tmp_path: Path) -> None:
    async for world in start(limits(tmp_path, login_attempts_per_address=4)):
        await world.api.user("ana")  # its login is the 2nd from 10.0.0.1 (admin's the 1st)
        for _ in range(2):
            assert (await login(world.api.http, "ana", USER_PASSWORD)).status_code == 200
        assert_limited(await login(world.api.http, "ana", USER_PASSWORD))
        async with world.client("10.0.0.9") as other:
            assert (await login(other, "ana", USER_PASSWORD)).status_code == 200


class BlockingHasher(PasswordHasher):
    """Holds every verify until the test releases it, noting whether it was
    released while it waited (it must be: the agent's write gets through)."""

    def __init__(self, inner: PasswordHasher) -> None:
        super().__init__(time_cost=inner.time_cost, memory_cost=inner.memory_cost, parallelism=1)
        self.entered = threading.Event()
        self.released = threading.Event()
        self.released_while_held: list[bool] = []

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.entered.set()
        self.released_while_held.append(self.released.wait(timeout=5))
        return super().verify(hash, password)


async def test_the_password_check_holds_no_write_transaction(world: World) -> None:
    api = world.api
    await api.user("ana")
    await api.agent("claude")
    sent = await api.send("ana", ["claude@/srv/shop.new"], subject="hello")
    assert sent.status_code == 201, sent.text
    hasher = BlockingHasher(world.gw.hasher)
    world.gw.hasher = hasher
    result: list[httpx.Response] = []

    async def log_in() -> None:
        result.append(await login(api.http, "ana", USER_PASSWORD))

    async with anyio.create_task_group() as tg:
        tg.start_soon(log_in)
        assert await anyio.to_thread.run_sync(hasher.entered.wait, 10)
        # While ana's password is being checked, the agent reads and writes.
        with anyio.fail_after(10):
            r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
            assert r.status_code == 200, r.text
            r = await api.send("claude", ["ana@/srv/shop"], subject="meanwhile")
            assert r.status_code == 201, r.text
        hasher.released.set()
    assert hasher.released_while_held == [True]
    assert result[0].status_code == 200, result[0].text
