"""The web UI's admin, session and grant actions in-process (fast), from every
side: who may, who is refused (403/404, or 303 to /login), and that a missing
CSRF token is refused before anything changes."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api

pytestmark = pytest.mark.anyio


@dataclass
class Browser:
    """One person's cookie jar and CSRF token, as a browser would hold them."""

    http: httpx.AsyncClient
    csrf: str

    async def submit(self, path: str, form: Mapping[str, str], csrf: bool = True) -> httpx.Response:
        """Post `form` as the page does, with its CSRF token unless `csrf` is False.
        For a form held in a dict: spread into `post` a key could fill `csrf`."""
        data = {**form, "csrf": self.csrf} if csrf else dict(form)
        return await self.http.post(path, data=data)

    async def post(self, path: str, csrf: bool = True, **form: str) -> httpx.Response:
        return await self.submit(path, form, csrf)


@asynccontextmanager
async def browser(api: Api, user: str, password: str = USER_PASSWORD) -> AsyncIterator[Browser]:
    transport = api.http._transport
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        page = await http.get("/login")
        m = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert m
        r = await http.post(
            "/login", data={"username": user, "password": password, "csrf": m.group(1)}
        )
        assert r.status_code == 303, r.text
        page = await http.get("/")
        m = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
        assert m
        yield Browser(http, m.group(1))


async def _is_admin(api: Api, name: str) -> bool:
    r = await api.http.get("/api/v1/admin/users", headers=api.auth("admin"))
    return any(u["is_admin"] for u in r.json()["items"] if u["username"] == name)


async def _can_login(api: Api, name: str, password: str) -> bool:
    r = await api.http.post("/api/v1/auth/login", json={"username": name, "password": password})
    return r.status_code == 200


# --- admin: make admin, revoke admin, reset password ----------------------------------


async def test_admin_makes_and_revokes_admins(api: Api) -> None:
    await api.user("ana")
    async with browser(api, "admin", ADMIN_PASSWORD) as boss:
        page = await boss.http.get("/admin")
        assert ">Make ana admin</button>" in page.text
        r = await boss.post("/admin/make-admin", username="ana")
        assert r.status_code == 303 and r.headers["location"] == "/admin"
        assert await _is_admin(api, "ana")
        # ana's existing token is an admin's at once (principals are read per request).
        r = await api.http.get("/api/v1/admin/users", headers=api.auth("ana"))
        assert r.status_code == 200
        page = await boss.http.get("/admin")
        assert 'aria-label="Revoke admin of ana"' in page.text
        r = await boss.post("/admin/revoke-admin", username="ana")
        assert r.status_code == 303
        assert not await _is_admin(api, "ana")
        r = await api.http.get("/api/v1/admin/users", headers=api.auth("ana"))
        assert r.status_code == 403
        # An unknown user is a clear 404, and the last admin stays one.
        r = await boss.post("/admin/make-admin", username="nobody")
        assert r.status_code == 404 and "nobody" in r.text
        r = await boss.post("/admin/revoke-admin", username="admin")
        assert r.status_code == 409 and "last admin" in r.text
        assert await _is_admin(api, "admin")


async def test_admin_resets_a_password_and_its_logins_end(api: Api) -> None:
    await api.user("bob")
    old_token = api.tokens["bob"]
    async with browser(api, "bob") as bob_web, browser(api, "admin", ADMIN_PASSWORD) as boss:
        r = await boss.post("/admin/reset-password", username="bob", password="short")
        assert r.status_code == 400 and "at least 8" in r.text
        assert await _can_login(api, "bob", USER_PASSWORD)
        r = await boss.post("/admin/reset-password", username="bob", password="x" * 1025)
        assert r.status_code == 400 and "at most 1024" in r.text
        r = await boss.post("/admin/reset-password", username="ghost", password="a-new-password")
        assert r.status_code == 404
        r = await boss.post("/admin/reset-password", username="bob", password="a-new-password")
        assert r.status_code == 303
        assert not await _can_login(api, "bob", USER_PASSWORD)
        assert await _can_login(api, "bob", "a-new-password")
        # Every earlier login of bob ended: the API token and the web session.
        r = await api.http.get("/api/v1/sessions", headers={"Authorization": f"Bearer {old_token}"})
        assert r.status_code == 401
        r = await bob_web.http.get("/")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        # An admin resetting its own password stays logged in on this page.
        r = await boss.post("/admin/reset-password", username="admin", password="admin-pass-2")
        assert r.status_code == 303
        assert (await boss.http.get("/admin")).status_code == 200
        assert await _can_login(api, "admin", "admin-pass-2")


@pytest.mark.parametrize(
    ("action", "form"),
    [
        ("make-admin", {"username": "eve"}),
        ("revoke-admin", {"username": "admin"}),
        ("reset-password", {"username": "admin", "password": "taken-over-1"}),
    ],
)
async def test_admin_actions_refuse_others_and_need_csrf(
    api: Api, action: str, form: dict[str, str]
) -> None:
    await api.user("eve")
    async with browser(api, "eve") as eve:
        r = await eve.submit(f"/admin/{action}", form)
        assert r.status_code == 403 and "admins only" in r.text
    async with browser(api, "admin", ADMIN_PASSWORD) as boss:
        for bad in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
            r = await boss.http.post(f"/admin/{action}", data={**form, **bad})
            assert r.status_code == 403, bad
    # Logged out: to the login page.
    r = await api.http.post(f"/admin/{action}", data=form)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert not await _is_admin(api, "eve")
    assert await _is_admin(api, "admin")
    assert await _can_login(api, "admin", ADMIN_PASSWORD)


# --- sessions: accepting an agent's proposed alias ------------------------------------


async def _session(api: Api, owner: str, agent: str) -> dict[str, Any]:
    r = await api.send(owner, [f"{agent}@/srv/app.new"], subject="Fix the login")
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


async def _propose(api: Api, agent: str, sid: str, alias: str) -> httpx.Response:
    return await api.http.post(
        f"/api/v1/agent/sessions/{sid}/alias-proposal",
        json={"alias": alias},
        headers=api.auth(agent),
    )


async def _get_session(api: Api, who: str, sid: str) -> dict[str, Any]:
    r = await api.http.get(f"/api/v1/sessions/{sid}", headers=api.auth(who))
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


async def test_owner_accepts_an_agents_proposed_alias(api: Api) -> None:
    await api.user("ana")
    await api.agent("bot")
    sid = (await _session(api, "ana", "bot"))["session_id"]
    r = await _propose(api, "bot", sid, "login-fix")
    assert r.status_code == 200, r.text
    assert r.json()["proposed_alias"] == "login-fix"
    assert r.json()["alias"] == "bot-fix-the-login"  # proposing renames nothing
    async with browser(api, "ana") as ana:
        page = await ana.http.get(f"/sessions/{sid}")
        assert "login-fix" in page.text and ">Accept alias<" in page.text
        r = await ana.post(f"/sessions/{sid}", action="accept-alias")
        assert r.status_code == 303, r.text
    got = await _get_session(api, "ana", sid)
    assert got["alias"] == "login-fix" and got.get("proposed_alias") is None


async def test_a_proposal_is_checked_and_only_deciders_accept(api: Api) -> None:
    await api.user("ana")
    await api.user("carl")  # cc'd: reads the session, decides nothing
    await api.user("eve")  # a stranger
    await api.agent("bot")
    await api.agent("other")
    sent = await _session(api, "ana", "bot")
    sid = sent["session_id"]
    r = await api.send(
        "ana",
        [f"bot@/srv/app.{sent['session_alias']}"],
        cc=[f"carl@/srv/app.{sent['session_alias']}"],
    )
    assert r.status_code == 201, r.text
    for bad in ("has space", "a.b", "new", "x" * 65, ""):
        r = await _propose(api, "bot", sid, bad)
        assert r.status_code == 400 and r.json()["error"]["field"] == "alias", bad
    r = await _propose(api, "other", sid, "mine")  # not in the session
    assert r.status_code == 404
    r = await api.http.post(
        f"/api/v1/agent/sessions/{sid}/alias-proposal",
        json={"alias": "mine"},
        headers=api.auth("ana"),
    )
    assert r.status_code in (401, 403)  # humans rename; they do not propose
    assert (await _propose(api, "bot", sid, "login-fix")).status_code == 200

    async with browser(api, "carl") as carl:
        page = await carl.http.get(f"/sessions/{sid}")
        assert page.status_code == 200 and "Accept alias" not in page.text
        r = await carl.post(f"/sessions/{sid}", action="accept-alias")
        assert r.status_code == 403
    async with browser(api, "eve") as eve:
        r = await eve.post(f"/sessions/{sid}", action="accept-alias")
        assert r.status_code == 404
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{sid}", csrf=False, action="accept-alias")
        assert r.status_code == 403
    got = await _get_session(api, "ana", sid)
    assert got["alias"] == sent["session_alias"] and got["proposed_alias"] == "login-fix"

    # Another rename leaves the proposal standing; a manual rename to the
    # proposed name settles it too; with no
    # proposal left, accepting is a clear 409.
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"alias": "other-name"}, headers=api.auth("ana")
    )
    assert r.status_code == 200 and r.json()["proposed_alias"] == "login-fix"
    r = await api.http.patch(
        f"/api/v1/sessions/{sid}", json={"alias": "login-fix"}, headers=api.auth("ana")
    )
    assert r.status_code == 200 and r.json().get("proposed_alias") is None
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{sid}", action="accept-alias")
        assert r.status_code == 409 and "no proposed alias" in r.text


async def test_accepting_a_taken_alias_is_a_conflict(api: Api) -> None:
    await api.user("ana")
    await api.agent("bot")
    first = await _session(api, "ana", "bot")
    second = await _session(api, "ana", "bot")
    assert (await _propose(api, "bot", second["session_id"], first["session_alias"])).is_success
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{second['session_id']}", action="accept-alias")
        assert r.status_code == 409 and "already used" in r.text
    got = await _get_session(api, "ana", second["session_id"])
    assert got["alias"] == second["session_alias"]
    assert got["proposed_alias"] == first["session_alias"]  # still there to see


# --- grants: "Always allow" and revoking, for the session's deciders ------------------


async def _ask(api: Api, agent: str, sid: str, command: str) -> dict[str, Any]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": sid,
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "relay_key": uuid.uuid4().hex,
        },
        headers=api.auth(agent),
    )
    assert r.status_code in (200, 201), r.text
    out: dict[str, Any] = r.json()
    return out


async def test_a_plain_decider_grants_always_and_revokes(api: Api) -> None:
    await api.user("ana")  # not an admin
    await api.agent("bot")
    sid = (await _session(api, "ana", "bot"))["session_id"]
    asked = await _ask(api, "bot", sid, "git status")
    async with browser(api, "ana") as ana:
        r = await ana.post(
            f"/approvals/{asked['id']}", decision="always", grant_pattern="git status"
        )
        assert r.status_code == 303, r.text
        again = await _ask(api, "bot", sid, "git status --short")
        assert again["status"] == "approved" and again["grant_id"]  # the grant decided it
        page = await ana.http.get(f"/sessions/{sid}")
        assert "<code>git status</code>" in page.text
        grant_id = again["grant_id"]
        assert f'value="{grant_id}"' in page.text
        r = await ana.post(f"/sessions/{sid}", action="revoke-grant", grant_id=grant_id)
        assert r.status_code == 303, r.text
    third = await _ask(api, "bot", sid, "git status")
    assert third["status"] == "pending"  # revoked: asked again


async def test_always_allow_names_the_command_and_grants_only_it(api: Api) -> None:
    """Issue 22, item 5: the button said "Always allow" and allowed every Bash command."""
    await api.user("ana")
    await api.agent("bot")
    sid = (await _session(api, "ana", "bot"))["session_id"]
    asked = await _ask(api, "bot", sid, "npm test")
    async with browser(api, "ana") as ana:
        page = await ana.http.get("/approvals")
        assert ">Always allow `npm test` here</button>" in page.text
        assert 'data-every="Always allow every Bash command here"' in page.text
        # The pattern is folded under a summary that says what opening it does
        # (the button names what it allows either way).
        assert '<label for="pattern-' in page.text
        assert "<summary>Change what “Always allow” covers</summary>" in page.text
        r = await ana.post(f"/approvals/{asked['id']}", decision="always")
        assert r.status_code == 303, r.text
        assert (await _ask(api, "bot", sid, "npm test"))["status"] == "approved"
        assert (await _ask(api, "bot", sid, "rm -rf build"))["status"] == "pending"
        assert (await _ask(api, "bot", sid, "npm test --watch"))["status"] == "pending"
        page = await ana.http.get(f"/sessions/{sid}")
        assert '<span class="covers">exactly <code>npm test</code></span>' in page.text
        assert "older grant" not in page.text


async def test_an_older_every_input_grant_is_flagged_on_the_session_page(api: Api) -> None:
    from sqlalchemy import update

    from mailui4agents.db.tables import GrantRow

    await api.user("ana")
    await api.agent("bot")
    sid = (await _session(api, "ana", "bot"))["session_id"]
    asked = await _ask(api, "bot", sid, "npm test")
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/approvals/{asked['id']}", decision="always")
        assert r.status_code == 303, r.text
        gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
        async with gw.write() as s:  # what migration 0013 made of an older grant
            await s.execute(update(GrantRow).values(pattern=None, scope="every"))
        page = await ana.http.get(f"/sessions/{sid}")
        assert '<span class="covers">every Bash command</span>' in page.text
        assert "older grant: every input</span>" in page.text


async def test_others_cannot_grant_or_revoke(api: Api) -> None:
    await api.user("ana")
    await api.user("carl")
    await api.user("eve")
    await api.agent("bot")
    sent = await _session(api, "ana", "bot")
    sid = sent["session_id"]
    r = await api.send(
        "ana",
        [f"bot@/srv/app.{sent['session_alias']}"],
        cc=[f"carl@/srv/app.{sent['session_alias']}"],
    )
    assert r.status_code == 201
    asked = await _ask(api, "bot", sid, "rm -rf build")
    async with browser(api, "carl") as carl:
        r = await carl.post(f"/approvals/{asked['id']}", decision="always")
        assert r.status_code == 403
    async with browser(api, "eve") as eve:
        r = await eve.post(f"/approvals/{asked['id']}", decision="always")
        assert r.status_code == 404
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/approvals/{asked['id']}", csrf=False, decision="always")
        assert r.status_code == 403
        r = await ana.post(f"/approvals/{asked['id']}", decision="always")
        assert r.status_code == 303
    grants = (await api.http.get("/api/v1/grants", headers=api.auth("ana"))).json()["items"]
    assert [g["created_by"] for g in grants if g["session_id"] == sid] == ["ana"]
    grant_id = grants[0]["id"]
    async with browser(api, "carl") as carl:
        page = await carl.http.get(f"/sessions/{sid}")
        assert "Revoke grant" not in page.text  # no button for a non-decider
        r = await carl.post(f"/sessions/{sid}", action="revoke-grant", grant_id=grant_id)
        assert r.status_code == 403
    async with browser(api, "eve") as eve:
        r = await eve.post(f"/sessions/{sid}", action="revoke-grant", grant_id=grant_id)
        assert r.status_code == 404
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{sid}", csrf=False, action="revoke-grant", grant_id=grant_id)
        assert r.status_code == 403
    # A grant of another session cannot be revoked through this session's page.
    other = (await _session(api, "ana", "bot"))["session_id"]
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/sessions/{other}", action="revoke-grant", grant_id=grant_id)
        assert r.status_code == 404
    grants = (await api.http.get("/api/v1/grants", headers=api.auth("ana"))).json()["items"]
    assert [g["id"] for g in grants] == [grant_id]  # still standing


async def test_a_stranger_reads_nothing_through_the_web_routes(api: Api) -> None:
    """Thread, attachment, reply form, completion: 404 or nothing for eve; an admin
    reads (docs/access.md) but decides nothing there."""
    await api.user("ana")
    await api.user("eve")
    await api.agent("bot")
    up = await api.http.post(
        "/api/v1/attachments",
        files={"file": ("plan.txt", b"secret plan", "text/plain")},
        headers=api.auth("ana"),
    )
    assert up.status_code == 201, up.text
    r = await api.send(
        "ana",
        ["bot@/srv/hidden.new"],
        subject="Secret",
        attachment_ids=[up.json()["attachment_id"]],
    )
    assert r.status_code == 201, r.text
    sent = r.json()
    sid = sent["session_id"]
    assert (await _propose(api, "bot", sid, "renamed-by-bot")).status_code == 200
    async with browser(api, "eve") as eve:
        assert (await eve.http.get(f"/sessions/{sid}")).status_code == 404
        r = await eve.http.get(f"/attachments/{up.json()['attachment_id']}")
        assert r.status_code == 404 and b"secret plan" not in r.content
        r = await eve.http.get("/compose", params={"reply_to": sent["id"]})
        assert r.status_code == 404 and "Secret" not in r.text
        r = await eve.http.get("/suggest", params={"q": "bot@/srv/hidden."})
        assert sent["session_alias"] not in r.text
        page = await eve.http.get("/")
        assert sid not in page.text
    async with browser(api, "admin", ADMIN_PASSWORD) as boss:
        page = await boss.http.get(f"/sessions/{sid}")
        assert page.status_code == 200 and "Secret" in page.text  # admins read
        assert "Accept alias" not in page.text and "Change mode" not in page.text
        for form in (
            {"action": "accept-alias"},
            {"action": "mode", "mode": "full"},
            {"action": "rename", "alias": "admins-name"},
        ):
            r = await boss.submit(f"/sessions/{sid}", form)
            assert r.status_code == 403, form
    got = await _get_session(api, "ana", sid)
    assert got["alias"] == sent["session_alias"] and got["permission_mode"] == "workspace"
