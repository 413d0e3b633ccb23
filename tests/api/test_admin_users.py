"""An admin makes or revokes admins and resets passwords over the API
(PATCH /api/v1/admin/users/{username}, PUT .../password): the same use cases as
the web admin page (services/logins.py). From every side: anonymous 401, an
agent 403, a person who is no admin 403, an admin 200; bad input a 4xx naming
the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api

pytestmark = pytest.mark.anyio

NEW_PASSWORD = "a-new-password-for-tests"


def _admin(name: str) -> str:
    return f"/api/v1/admin/users/{name}"


def _password(name: str) -> str:
    return f"/api/v1/admin/users/{name}/password"


async def _world(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    await api.agent("bot")


async def _can_login(api: Api, name: str, password: str) -> bool:
    r = await api.http.post("/api/v1/auth/login", json={"username": name, "password": password})
    return r.status_code == 200


async def _is_admin(api: Api, name: str) -> bool:
    r = await api.http.get("/api/v1/admin/users", headers=api.auth("admin"))
    return any(u["is_admin"] for u in r.json()["items"] if u["username"] == name)


def _error(r: httpx.Response) -> dict[str, Any]:
    err: dict[str, Any] = r.json()["error"]
    return err


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", _admin("bob"), {"is_admin": True}),
        ("PUT", _password("bob"), {"password": NEW_PASSWORD}),
    ],
)
async def test_only_an_admin_changes_a_user(
    api: Api, method: str, path: str, body: dict[str, Any]
) -> None:
    await _world(api)
    anonymous = await api.http.request(method, path, json=body)
    assert anonymous.status_code == 401, anonymous.text
    assert _error(anonymous)["code"] == "unauthorized"
    for who in ("bot", "ana"):
        refused = await api.http.request(method, path, json=body, headers=api.auth(who))
        assert refused.status_code == 403, (who, refused.text)
        assert _error(refused)["code"] == "forbidden"
    # Nothing changed for the refused callers.
    assert not await _is_admin(api, "bob")
    assert await _can_login(api, "bob", USER_PASSWORD)

    done = await api.http.request(method, path, json=body, headers=api.auth("admin"))
    assert done.status_code == 200, done.text
    assert set(done.json()) == {"username", "is_admin", "created_at"}
    assert done.json()["username"] == "bob"


async def test_an_admin_makes_and_revokes_an_admin_but_never_the_last(api: Api) -> None:
    await _world(api)
    r = await api.http.patch(_admin("ana"), json={"is_admin": True}, headers=api.auth("admin"))
    assert (r.status_code, r.json()["is_admin"]) == (200, True)
    # ana's own token is an admin's at once (principals are read per request).
    assert (await api.http.get("/api/v1/admin/users", headers=api.auth("ana"))).status_code == 200
    r = await api.http.patch(_admin("ana"), json={"is_admin": False}, headers=api.auth("admin"))
    assert (r.status_code, r.json()["is_admin"]) == (200, False)
    assert (await api.http.get("/api/v1/admin/users", headers=api.auth("ana"))).status_code == 403

    last = await api.http.patch(
        _admin("admin"), json={"is_admin": False}, headers=api.auth("admin")
    )
    assert last.status_code == 409, last.text
    assert await _is_admin(api, "admin")


async def test_a_reset_ends_the_users_logins_and_keeps_an_admins_own(api: Api) -> None:
    await _world(api)
    r = await api.http.put(
        _password("ana"), json={"password": NEW_PASSWORD}, headers=api.auth("admin")
    )
    assert r.status_code == 200, r.text
    assert not await _can_login(api, "ana", USER_PASSWORD)
    assert await _can_login(api, "ana", NEW_PASSWORD)
    old = await api.http.get("/api/v1/auth/tokens", headers=api.auth("ana"))
    assert old.status_code == 401  # the token ana had before the reset ended

    # An admin resetting itself keeps the token it asked with.
    r = await api.http.put(
        _password("admin"), json={"password": NEW_PASSWORD}, headers=api.auth("admin")
    )
    assert r.status_code == 200, r.text
    assert (await api.http.get("/api/v1/admin/users", headers=api.auth("admin"))).status_code == 200
    assert not await _can_login(api, "admin", ADMIN_PASSWORD)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("PATCH", _admin("bob"), {"is_admin": "yes"}, 400, "is_admin"),
        ("PATCH", _admin("bob"), {}, 400, "is_admin"),
        ("PATCH", _admin("bob"), {"is_admin": True, "admin": True}, 400, "admin"),
        ("PATCH", _admin("nobody"), {"is_admin": True}, 404, "username"),
        ("PUT", _password("bob"), {"password": "short"}, 400, "password"),
        ("PUT", _password("bob"), {"password": 12345678}, 400, "password"),
        ("PUT", _password("bob"), {}, 400, "password"),
        ("PUT", _password("nobody"), {"password": NEW_PASSWORD}, 404, "username"),
    ],
)
async def test_bad_input_is_refused_naming_the_field(
    api: Api, method: str, path: str, body: dict[str, Any], status: int, field: str
) -> None:
    await _world(api)
    r = await api.http.request(method, path, json=body, headers=api.auth("admin"))
    assert r.status_code == status, r.text
    assert _error(r)["field"] == field, r.text
    assert not await _is_admin(api, "bob")
    assert await _can_login(api, "bob", USER_PASSWORD)
