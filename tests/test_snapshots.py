"""The snapshot fixture of tests/conftest.py: a module's world is built once per
backend, and every test starts on its own fresh copy of it, logged in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, Api, copy_template, fast_settings, snapshot, started_app

pytestmark = pytest.mark.anyio

BUILDS: list[str] = []


@snapshot
async def world(api: Api) -> dict[str, Any]:
    """User ana and agent claude; one mail from ana to claude."""
    BUILDS.append("built")
    await api.user("ana")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="hello")
    assert r.status_code == 201, r.text
    return {"mail": r.json()["id"], "seen": []}


async def users(api: Api) -> list[str]:
    r = await api.http.get("/api/v1/admin/users", headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    return sorted(u["username"] for u in r.json()["items"])


@pytest.mark.parametrize("run", [1, 2, 3])
async def test_each_test_starts_on_its_own_copy_of_the_world(
    api: Api, world: dict[str, Any], run: int
) -> None:
    # What an earlier test wrote (bob, a read mark, the returned value) is not here.
    assert await users(api) == ["admin", "ana"]
    assert world["seen"] == []
    r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()["items"]] == [world["mail"]]  # unread
    # ...and what this one writes reaches no other test.
    r = await api.http.post(
        "/api/v1/agent/inbox/read", json={"mail_ids": [world["mail"]]}, headers=api.auth("claude")
    )
    assert r.status_code == 200, r.text
    await api.user("bob")
    world["seen"].append(run)
    # Built once per backend, not per test.
    assert 1 <= len(BUILDS) <= 2


async def test_the_world_s_tokens_are_valid_without_logging_in_again(
    api: Api, world: dict[str, Any]
) -> None:
    assert set(api.tokens) == {"admin", "ana", "claude"}
    r = await api.http.get(f"/api/v1/mail/{world['mail']}", headers=api.auth("ana"))
    assert r.status_code == 200, r.text
    bad = {"Authorization": "Bearer am_user_not-a-token"}
    assert (await api.http.get("/api/v1/mailbox", headers=bad)).status_code == 401


async def test_a_test_without_the_snapshot_starts_on_the_empty_template(api: Api) -> None:
    assert await users(api) == ["admin"]
    assert set(api.tokens) == {"admin"}


async def test_a_kept_app_started_again_serves_the_new_settings_database(
    tmp_path: Path, template_db: Path
) -> None:
    # started_app keeps an app whose lifespan ended and starts it again for the
    # next test: that start must open the next test's database, not the first.
    first, second = fast_settings(tmp_path / "a"), fast_settings(tmp_path / "b")
    for s in (first, second):
        copy_template(template_db, s.data_dir)
    async with started_app(first) as app:
        a = Api(httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw"))
        await a.login("admin", ADMIN_PASSWORD)
        await a.user("bob")
        assert await users(a) == ["admin", "bob"]
    async with started_app(second) as again:
        assert again is app  # the same object: the pool is what is under test
        assert again.state.gateway.settings is second
        b = Api(httpx.AsyncClient(transport=httpx.ASGITransport(app=again), base_url="http://gw"))
        await b.login("admin", ADMIN_PASSWORD)
        assert await users(b) == ["admin"]
