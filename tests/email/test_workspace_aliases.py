"""The workspace aliases the admin keeps for new work by e-mail
(services/workspace_aliases.py; GET|PUT|DELETE /api/v1/admin/workspace-aliases):
from every side (anonymous 401, an agent 403, a person who is no admin 403, an
admin 200/201), bad input a 400 naming the field, and the count's limit."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from mailui4agents.services import workspace_aliases
from tests.conftest import Api

pytestmark = pytest.mark.anyio

BASE = "/api/v1/admin/workspace-aliases"


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    return err


async def _world(api: Api) -> None:
    await api.user("ana")
    await api.agent("bot")


async def _aliases(api: Api) -> list[dict[str, Any]]:
    r = await api.http.get(BASE, headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", BASE, None),
        ("PUT", f"{BASE}/shop", {"workspace": "/srv/shop"}),
        ("DELETE", f"{BASE}/keep", None),
    ],
)
async def test_only_an_admin_keeps_aliases(
    api: Api, method: str, path: str, body: dict[str, Any] | None
) -> None:
    await _world(api)
    made = await api.http.put(
        f"{BASE}/keep", json={"workspace": "/srv/keep"}, headers=api.auth("admin")
    )
    assert made.status_code == 201, made.text
    anonymous = await api.http.request(method, path, json=body)
    assert _error(anonymous, 401)["code"] == "unauthorized"
    for who in ("bot", "ana"):
        refused = await api.http.request(method, path, json=body, headers=api.auth(who))
        assert _error(refused, 403)["code"] == "forbidden", who
    # Nothing changed for the refused callers.
    assert [a["alias"] for a in await _aliases(api)] == ["keep"]
    done = await api.http.request(method, path, json=body, headers=api.auth("admin"))
    assert done.status_code in (200, 201), done.text


async def test_an_admin_adds_changes_lists_and_removes_an_alias(api: Api) -> None:
    await _world(api)
    admin = api.auth("admin")
    r = await api.http.put(f"{BASE}/shop", json={"workspace": "/srv//shop/"}, headers=admin)
    assert r.status_code == 201, r.text
    assert r.json()["alias"] == "shop"
    assert r.json()["workspace"] == "/srv/shop"  # normalised like every workspace
    assert r.json()["created_by"] == "admin"
    again = await api.http.put(f"{BASE}/shop", json={"workspace": "/srv/shop2"}, headers=admin)
    assert again.status_code == 200, again.text  # changed, not new
    await api.http.put(f"{BASE}/a-1", json={"workspace": "/srv/a"}, headers=admin)
    listed = await _aliases(api)
    assert [(a["alias"], a["workspace"]) for a in listed] == [
        ("a-1", "/srv/a"),
        ("shop", "/srv/shop2"),
    ]
    gone = await api.http.delete(f"{BASE}/shop", headers=admin)
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"removed": "shop"}
    assert [a["alias"] for a in await _aliases(api)] == ["a-1"]
    missing = await api.http.delete(f"{BASE}/shop", headers=admin)
    assert _error(missing, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("alias", "workspace", "field"),
    [
        ("Shop", "/srv/shop", "alias"),  # upper case: it goes into a local part
        ("-shop", "/srv/shop", "alias"),
        ("sh_op", "/srv/shop", "alias"),
        ("sh.op", "/srv/shop", "alias"),
        ("a" * 64, "/srv/shop", "alias"),
        ("shop", "srv/shop", "workspace"),  # not absolute
        ("shop", "/srv/\u202eshop", "workspace"),  # a format character
        ("shop", "", "workspace"),
    ],
)
async def test_a_bad_alias_or_workspace_is_refused_naming_the_field(
    api: Api, alias: str, workspace: str, field: str
) -> None:
    await _world(api)
    r = await api.http.put(
        f"{BASE}/{alias}", json={"workspace": workspace}, headers=api.auth("admin")
    )
    err = _error(r, 400)
    assert err["field"] == field, err
    assert await _aliases(api) == []


async def test_the_longest_alias_is_accepted(api: Api) -> None:
    await _world(api)
    alias = "a" + "-" * 61 + "z"
    r = await api.http.put(f"{BASE}/{alias}", json={"workspace": "/srv"}, headers=api.auth("admin"))
    assert r.status_code == 201, r.text


async def test_an_unknown_body_field_is_refused(api: Api) -> None:
    await _world(api)
    r = await api.http.put(
        f"{BASE}/shop", json={"workspace": "/srv/shop", "path": "/x"}, headers=api.auth("admin")
    )
    assert _error(r, 400)["field"] == "path"


async def test_past_the_limit_a_new_alias_is_refused_but_one_may_still_change(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _world(api)
    monkeypatch.setattr(workspace_aliases, "MAX_WORKSPACE_ALIASES", 2)
    admin = api.auth("admin")
    for name in ("one", "two"):
        made = await api.http.put(f"{BASE}/{name}", json={"workspace": "/srv"}, headers=admin)
        assert made.status_code == 201, made.text
    third = await api.http.put(f"{BASE}/three", json={"workspace": "/srv"}, headers=admin)
    err = _error(third, 409)
    assert err["reason"] == "too_many_aliases" and err["limit"] == 2
    changed = await api.http.put(f"{BASE}/two", json={"workspace": "/srv/x"}, headers=admin)
    assert changed.status_code == 200, changed.text


async def test_admins_creating_one_alias_at_once_make_it_once(api: Api) -> None:
    """Ten PUTs of one new alias at once: one creates it (201), the others
    change it (200), none fails (on PostgreSQL the losers' inserts conflict)."""
    await _world(api)
    admin = api.auth("admin")

    async def put(i: int) -> int:
        r = await api.http.put(f"{BASE}/race", json={"workspace": f"/srv/{i}"}, headers=admin)
        assert r.status_code in (200, 201), r.text
        return r.status_code

    codes = await asyncio.gather(*(put(i) for i in range(10)))
    assert sorted(codes) == [200] * 9 + [201]
    assert [a["alias"] for a in await _aliases(api)] == ["race"]
