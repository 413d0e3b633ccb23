"""Human tokens: login tokens expire, people list and revoke their own tokens
(and only theirs), and rotating an agent key retires the old key at once or
after a stated grace period. Expired or revoked credentials are 401 and end
their open streams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.settings import Settings
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, fast_settings
from tests.live_app import LiveApp, live_app

pytestmark = pytest.mark.anyio

TTL_S = 3600.0


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return fast_settings(tmp_path, login_token_ttl_s=TTL_S)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    return err


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def tokens_of(api: Api, token: str) -> list[dict[str, Any]]:
    r = await api.http.get("/api/v1/auth/tokens", headers=bearer(token))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    assert r.json()["next_cursor"] is None
    return items


# --- listing ------------------------------------------------------------------------


async def test_a_user_lists_own_tokens_with_login_expiry_and_the_current_one_marked(
    api: Api,
) -> None:
    first = await api.user("ana")
    second = await api.login("ana", USER_PASSWORD)
    r = await api.http.post("/api/v1/auth/tokens", json={"name": "ci"}, headers=bearer(first))
    assert r.status_code == 201, r.text
    await api.user("bob")

    items = await tokens_of(api, second)
    assert sorted(t["name"] for t in items) == ["ci", "login", "login"]
    assert [t["current"] for t in items].count(True) == 1
    [current] = [t for t in items if t["current"]]
    assert current["name"] == "login"
    now = datetime.now(UTC)
    for t in items:
        assert set(t) == {"id", "name", "created_at", "expires_at", "current"}  # no secret
        if t["name"] == "login":  # login tokens last settings.login_token_ttl_s
            left = when(t["expires_at"]) - now
            assert timedelta(seconds=TTL_S - 120) < left <= timedelta(seconds=TTL_S + 1)
        else:
            assert t["expires_at"] is None  # named tokens last until revoked
    # bob's list holds only bob's token
    assert [t["name"] for t in await tokens_of(api, api.tokens["bob"])] == ["login"]


# --- revoking -----------------------------------------------------------------------


async def test_a_user_revokes_an_own_token_which_then_is_401_while_others_work(
    api: Api,
) -> None:
    first = await api.user("ana")
    second = await api.login("ana", USER_PASSWORD)
    [target] = [t for t in await tokens_of(api, second) if not t["current"]]
    r = await api.http.delete(f"/api/v1/auth/tokens/{target['id']}", headers=bearer(second))
    assert r.status_code == 200, r.text
    assert r.json() == {"revoked": target["id"]}
    assert (
        error(await api.http.get("/api/v1/mailbox", headers=bearer(first)), 401)["code"]
        == "unauthorized"
    )
    assert (await api.http.get("/api/v1/mailbox", headers=bearer(second))).status_code == 200
    assert [t["id"] for t in await tokens_of(api, second)] != [target["id"]]
    again = await api.http.delete(f"/api/v1/auth/tokens/{target['id']}", headers=bearer(second))
    assert error(again, 404)["code"] == "not_found"  # once only


async def test_another_users_token_cannot_be_revoked_and_looks_unknown(api: Api) -> None:
    ana = await api.user("ana")
    bob = await api.user("bob")
    [anas] = await tokens_of(api, ana)
    for who in (bob, api.tokens["admin"]):  # admins neither: tokens are personal
        r = await api.http.delete(f"/api/v1/auth/tokens/{anas['id']}", headers=bearer(who))
        assert error(r, 404)["code"] == "not_found"
    unknown = await api.http.delete("/api/v1/auth/tokens/no-such-id", headers=bearer(bob))
    assert error(unknown, 404)["code"] == "not_found"  # same answer as someone else's
    assert (await api.http.get("/api/v1/mailbox", headers=bearer(ana))).status_code == 200


async def test_token_routes_refuse_anonymous_401_and_agent_keys_403(api: Api) -> None:
    ana = await api.user("ana")
    [anas] = await tokens_of(api, ana)
    key = await api.agent("claude")
    for method, path in (
        ("GET", "/api/v1/auth/tokens"),
        ("DELETE", f"/api/v1/auth/tokens/{anas['id']}"),
    ):
        r = await api.http.request(method, path)
        assert error(r, 401)["code"] == "unauthorized"
        r = await api.http.request(method, path, headers=bearer(key))
        assert error(r, 403)["code"] == "forbidden"
    assert (await api.http.get("/api/v1/mailbox", headers=bearer(ana))).status_code == 200


# --- rotating agent keys -------------------------------------------------------------


async def rotate(api: Api, name: str, query: str = "") -> httpx.Response:
    return await api.http.post(
        f"/api/v1/admin/agents/{name}/keys{query}", headers=api.auth("admin")
    )


async def test_rotating_a_key_revokes_the_old_one_at_once_by_default(api: Api) -> None:
    old = await api.agent("claude")
    other = await api.agent("codex")
    r = await rotate(api, "claude")
    assert r.status_code == 201, r.text
    assert r.json()["grace_s"] == 0
    new = r.json()["key"]
    assert error(await api.http.get("/api/v1/agent/inbox", headers=bearer(old)), 401)
    assert (await api.http.get("/api/v1/agent/inbox", headers=bearer(new))).status_code == 200
    # another agent's key is untouched
    assert (await api.http.get("/api/v1/agent/inbox", headers=bearer(other))).status_code == 200


async def test_rotating_with_a_grace_period_keeps_the_old_key_until_then(api: Api) -> None:
    old = await api.agent("claude")
    r = await rotate(api, "claude", "?grace_s=600")
    assert r.status_code == 201, r.text
    new = r.json()["key"]
    for key in (old, new):
        assert (await api.http.get("/api/v1/agent/inbox", headers=bearer(key))).status_code == 200
    listed = await api.http.get("/api/v1/admin/agents", headers=api.auth("admin"))
    [row] = [a for a in listed.json()["items"] if a["name"] == "claude"]
    ends = sorted((k["expires_at"] or "") for k in row["keys"])
    assert ends[0] == ""  # the new key: no end
    left = when(ends[1]) - datetime.now(UTC)
    assert timedelta(seconds=480) < left <= timedelta(seconds=601)


@pytest.mark.parametrize("grace", ["-1", "2592001", "soon"])
async def test_a_bad_grace_period_is_400_naming_it_and_rotates_nothing(
    api: Api, grace: str
) -> None:
    old = await api.agent("claude")
    r = await rotate(api, "claude", f"?grace_s={grace}")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == "grace_s"
    assert (await api.http.get("/api/v1/agent/inbox", headers=bearer(old))).status_code == 200


# --- open streams end with their credential ------------------------------------------


@asynccontextmanager
async def open_stream(url: str, path: str, token: str) -> AsyncIterator[anyio.Event]:
    """An open SSE stream; the event is set when the gateway ends it."""
    ended = anyio.Event()
    opened = anyio.Event()

    async def read() -> None:
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as http,
            http.stream("GET", path, headers=bearer(token)) as r,
        ):
            assert r.status_code == 200
            opened.set()
            async for _ in r.aiter_raw():
                pass
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        with anyio.fail_after(30):
            await opened.wait()
        yield ended
        tg.cancel_scope.cancel()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[LiveApp]:
    # The re-check timer is out of reach: a stream that ends did so for its revocation.
    settings = fast_settings(tmp_path, login_token_ttl_s=TTL_S, sse_token_recheck_s=3600)
    with live_app(settings) as live:
        yield live


@asynccontextmanager
async def client_for(served: LiveApp) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        api = Api(http)
        await api.login("admin", ADMIN_PASSWORD)
        yield api


async def test_revoking_a_token_ends_its_stream_but_not_the_users_other_stream(
    served: LiveApp,
) -> None:
    async with client_for(served) as api:
        first = await api.user("ana")
        second = await api.login("ana", USER_PASSWORD)
        [target] = [t for t in await tokens_of(api, second) if not t["current"]]
        async with (
            open_stream(served.url, "/api/v1/events", first) as first_ended,
            open_stream(served.url, "/api/v1/events", second) as second_ended,
        ):
            r = await api.http.delete(f"/api/v1/auth/tokens/{target['id']}", headers=bearer(second))
            assert r.status_code == 200, r.text
            with anyio.fail_after(10):  # the timer is an hour: the revocation did it
                await first_ended.wait()
            assert not second_ended.is_set()


async def test_rotation_ends_the_old_keys_stream_now_or_when_its_grace_ends(
    served: LiveApp,
) -> None:
    async with client_for(served) as api:
        old = await api.agent("claude")
        async with open_stream(served.url, "/api/v1/agent/events", old) as ended:
            r = await rotate(api, "claude", "?grace_s=2")
            assert r.status_code == 201, r.text
            assert not ended.is_set()  # still in its grace period
            new = r.json()["key"]
            with anyio.fail_after(15):  # the hub's clock ends it once the grace is over
                await ended.wait()
        assert error(await api.http.get("/api/v1/agent/inbox", headers=bearer(old)), 401)
        async with open_stream(served.url, "/api/v1/agent/events", new) as ended:
            r = await rotate(api, "claude")
            assert r.status_code == 201, r.text
            with anyio.fail_after(10):
                await ended.wait()


async def test_an_expired_login_token_is_401_and_ends_its_stream(tmp_path: Path) -> None:
    with live_app(fast_settings(tmp_path, login_token_ttl_s=2)) as served:
        async with client_for(served) as api:
            ana = await api.user("ana")
            named = await api.http.post(
                "/api/v1/auth/tokens", json={"name": "script"}, headers=bearer(ana)
            )
            assert named.status_code == 201, named.text
            async with open_stream(served.url, "/api/v1/events", ana) as ended:
                with anyio.fail_after(15):
                    await ended.wait()
            r = await api.http.get("/api/v1/mailbox", headers=bearer(ana))
            assert error(r, 401)["code"] == "unauthorized"
            # a named token does not expire
            r = await api.http.get("/api/v1/mailbox", headers=bearer(named.json()["token"]))
            assert r.status_code == 200, r.text
