"""Names and workspaces as the API takes them: invisible and bidi characters are
refused, names stored NFC, look-alikes reported to the admin, workspace paths in
addresses, agent declarations, heartbeats and interactive sessions normalised."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio

BAD_NAMES = ["an\u200ba", "ana\u202e", "a\u0000b", "a\u2028", "\ufeffana"]


def err(r: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status, r.text
    e: dict[str, Any] = r.json()["error"]
    return e


async def add_user(api: Api, name: str) -> httpx.Response:
    body = {"username": name, "password": "password-123"}
    return await api.http.post("/api/v1/admin/users", json=body, headers=api.auth("admin"))


async def add_agent(api: Api, name: str, **extra: Any) -> httpx.Response:
    body = {"name": name, **extra}
    return await api.http.post("/api/v1/admin/agents", json=body, headers=api.auth("admin"))


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_a_name_with_an_invisible_or_bidi_character_is_refused(api: Api, bad: str) -> None:
    e = err(await add_user(api, bad))
    assert (e["code"], e["field"]) == ("invalid_value", "username")
    assert "U+" in e["message"]
    assert err(await add_agent(api, bad))["field"] == "name"
    assert (await add_user(api, "ana")).status_code == 201  # the visible name is fine


async def test_a_name_is_stored_in_nfc_so_both_spellings_are_one_name(api: Api) -> None:
    r = await add_user(api, "jose\u0301")
    assert r.status_code == 201, r.text
    assert r.json()["username"] == "jos\u00e9"
    assert err(await add_agent(api, "jos\u00e9"), 409)["code"] == "conflict"
    # An address typed decomposed reaches the composed name.
    await api.agent("claude")
    r = await api.send("claude", ["jose\u0301@/srv/shop.new"])
    assert r.status_code == 201, r.text
    assert r.json()["to"][0].startswith("jos\u00e9@")


async def test_the_admin_is_warned_of_a_look_alike_name_and_the_name_is_created(
    api: Api,
) -> None:
    assert (await add_user(api, "ana")).json()["warnings"] == []
    r = await add_user(api, "\u0430na")  # Cyrillic а
    assert r.status_code == 201, r.text
    [warning] = r.json()["warnings"]
    assert (warning["code"], warning["similar_to"]) == ("confusable", ["ana"])
    r = await add_agent(api, "Ana")
    assert r.status_code == 201, r.text
    assert r.json()["warnings"][0]["similar_to"] == ["ana", "\u0430na"]
    assert (await add_agent(api, "bob")).json()["warnings"] == []


@pytest.mark.parametrize(
    ("address", "workspace"),
    [
        ("claude@/srv//shop/.new", "/srv/shop"),
        ("claude@/srv/x/../shop.new", "/srv/shop"),
        ("claude@//srv/./shop.new", "/srv/shop"),
    ],
)
async def test_a_workspace_in_an_address_is_normalised(
    api: Api, address: str, workspace: str
) -> None:
    await api.agent("claude")
    await api.user("ana")
    r = await api.send("ana", [address])
    assert r.status_code == 201, r.text
    assert r.json()["workspace"] == workspace


async def test_differently_spelt_paths_reach_one_default_session(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    a = (await api.send("ana", ["claude@/srv/shop"])).json()
    b = (await api.send("ana", ["claude@/srv//shop/"])).json()
    assert a["session_id"] == b["session_id"]


@pytest.mark.parametrize(
    "address", ["claude@/srv/\u0007shop.new", "claude@/srv/\u202eshop.new", "claude@/" + "a" * 1100]
)
async def test_a_workspace_with_control_characters_or_too_long_is_refused(
    api: Api, address: str
) -> None:
    await api.agent("claude")
    await api.user("ana")
    assert err(await api.send("ana", ["claude@/srv/shop.new", address]))["field"] == "to[1]"


async def workspaces_of(api: Api, agent: str, key: str = "workspaces") -> list[str]:
    listed = await api.http.get("/api/v1/admin/agents", headers=api.auth("admin"))
    found: list[str] = next(a for a in listed.json()["items"] if a["name"] == agent)[key]
    return found


async def test_declared_and_reported_workspaces_are_normalised(api: Api) -> None:
    r = await add_agent(api, "claude", workspaces=["/srv//shop/", "/srv/a/../b"])
    assert r.status_code == 201, r.text
    api.tokens["claude"] = r.json()["key"]
    assert await workspaces_of(api, "claude") == ["/srv/shop", "/srv/b"]
    assert err(await add_agent(api, "codex", workspaces=["/ok", "/a\u0000"]))["field"] == (
        "workspaces[1]"
    )
    hb = "/api/v1/agent/heartbeat"
    r = await api.http.post(hb, json={"workspaces": ["/w//x/"]}, headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    assert await workspaces_of(api, "claude", "reported_workspaces") == ["/w/x"]
    # What an agent reports never changes where it may work (its roots).
    assert await workspaces_of(api, "claude") == ["/srv/shop", "/srv/b"]
    r = await api.http.post(hb, json={"workspaces": ["/w\u202e"]}, headers=api.auth("claude"))
    assert err(r)["field"] == "workspaces[0]"


async def test_an_interactive_session_cwd_is_normalised(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude", owners=["ana"])  # a terminal session is decided by an owner
    url = "/api/v1/agent/sessions/interactive"
    body = {"platform_id": "p1", "owner": "ana", "cwd": "/srv//shop/"}
    r = await api.http.post(url, json=body, headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    assert r.json()["workspace"] == "/srv/shop"
    r = await api.http.post(
        url, json={**body, "platform_id": "p2", "cwd": "/srv/\x00"}, headers=api.auth("claude")
    )
    assert err(r)["field"] == "cwd"


async def test_an_alias_with_a_bidi_character_is_refused(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    m = (await api.send("ana", ["claude@/srv/shop.new"])).json()
    url = f"/api/v1/sessions/{m['session_id']}"
    r = await api.http.patch(url, json={"alias": "fix\u202etxt"}, headers=api.auth("ana"))
    assert err(r)["field"] == "alias"
    r = await api.http.patch(url, json={"alias": "fix-txt"}, headers=api.auth("ana"))
    assert r.status_code == 200, r.text
