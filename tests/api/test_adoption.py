"""Adopting an agent platform's own session by mail (docs/behaviour.md).

Only the agent's owners see and adopt its platform sessions (docs/access.md)."""

from __future__ import annotations

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio

TERMINAL = {
    "platform_id": "claude-code:5f1c",
    "slug": "fix-flaky-tests",
    "title": "Fix flaky tests",
    "cwd": "/srv/shop",
    "updated_at": "2026-11-30T10:00:00Z",
}


@pytest.fixture
async def reported(api: Api) -> Api:
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude", owners=["ana"])
    r = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"status": "online", "platform_sessions": [TERMINAL]},
        headers=api.auth("claude"),
    )
    assert r.status_code == 200, r.text
    return api


async def test_mail_to_the_slug_adopts_the_platform_session(reported: Api) -> None:
    api = reported
    r = await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="")
    assert r.status_code == 201, r.text
    m = r.json()
    assert m["session_alias"] == "fix-flaky-tests"
    assert m["subject"] == "Fix flaky tests"  # defaults to the platform title
    assert m["platform_session_id"] == "claude-code:5f1c"
    inbox = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert inbox.json()["items"][0]["platform_session_id"] == "claude-code:5f1c"
    again = await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="more")
    assert again.json()["session_id"] == m["session_id"]
    assert again.json()["platform_session_id"] == "claude-code:5f1c"


async def test_a_platform_session_is_adopted_once_only(reported: Api) -> None:
    api = reported
    assert (
        await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="a")
    ).status_code == 201
    # bob is not in ana's adopted session and cannot adopt the same platform session again.
    r = await api.send("bob", ["claude@/srv/shop.fix-flaky-tests"], subject="b")
    assert r.status_code == 404


async def test_another_workspace_does_not_adopt(reported: Api) -> None:
    api = reported
    r = await api.send("ana", ["claude@/srv/blog.fix-flaky-tests"], subject="wrong path")
    assert r.status_code == 404


async def test_slug_taken_by_a_local_session_gets_a_suffix(reported: Api) -> None:
    api = reported
    # bob owns a local session whose alias equals the slug; ana adopting gets -2.
    await api.send("bob", ["claude@/srv/shop.new"], subject="fix flaky tests")
    local = (await api.http.get("/api/v1/sessions", headers=api.auth("bob"))).json()["items"][0]
    assert local["alias"] == "claude-fix-flaky-tests"
    await api.http.patch(
        f"/api/v1/sessions/{local['id']}",
        json={"alias": "fix-flaky-tests"},
        headers=api.auth("bob"),
    )
    r = await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="mine")
    assert r.status_code == 201, r.text
    assert r.json()["session_alias"] == "fix-flaky-tests-2"
    assert r.json()["platform_session_id"] == "claude-code:5f1c"


async def test_heartbeat_mirror_drops_sessions_no_longer_reported(reported: Api) -> None:
    api = reported
    await api.http.post(
        "/api/v1/agent/heartbeat", json={"platform_sessions": []}, headers=api.auth("claude")
    )
    r = await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="gone")
    assert r.status_code == 404


async def test_only_the_agents_owners_adopt_its_platform_sessions(reported: Api) -> None:
    api = reported
    # bob is not claude's owner: to him the slug is an unknown alias, even first.
    r = await api.send("bob", ["claude@/srv/shop.fix-flaky-tests"], subject="mine now")
    assert r.status_code == 404
    assert r.json()["error"]["close_matches"] == []
    # ...and nothing was taken: ana, the owner, still adopts it.
    ok = await api.send("ana", ["claude@/srv/shop.fix-flaky-tests"], subject="")
    assert ok.status_code == 201, ok.text
    assert ok.json()["platform_session_id"] == "claude-code:5f1c"


async def test_an_admin_who_is_not_an_owner_cannot_adopt(reported: Api) -> None:
    api = reported
    r = await api.send("admin", ["claude@/srv/shop.fix-flaky-tests"], subject="")
    assert r.status_code == 404


async def test_platform_sessions_are_shown_only_to_the_agents_owners(reported: Api) -> None:
    api = reported
    await api.agent("codex")
    q = {"q": "claude@/srv/shop."}

    def adoptable(r: object) -> list[str]:
        body = r.json()  # type: ignore[attr-defined]
        return [x["alias"] for x in body["sessions"] if x["adoptable"]]

    ana = await api.http.get("/api/v1/contacts/suggest", params=q, headers=api.auth("ana"))
    assert adoptable(ana) == ["fix-flaky-tests"]
    for other in ("bob", "admin"):
        r = await api.http.get("/api/v1/contacts/suggest", params=q, headers=api.auth(other))
        assert adoptable(r) == [], other
    # Another agent never sees them (it needs a session scope for suggestions at all).
    await api.send("ana", ["codex@/srv/shop.new"], subject="work")
    scope = (await api.http.get("/api/v1/agent/inbox", headers=api.auth("codex"))).json()
    sid = scope["items"][0]["session_id"]
    r = await api.http.get(
        "/api/v1/agent/contacts/suggest",
        params={**q, "session_id": sid},
        headers=api.auth("codex"),
    )
    assert r.status_code == 200, r.text
    assert adoptable(r) == []


async def test_an_admin_assigns_and_removes_agent_owners(reported: Api) -> None:
    api = reported
    url = "/api/v1/admin/agents/claude/owners"
    r = await api.http.post(url, json={"name": "bob"}, headers=api.auth("admin"))
    assert r.status_code == 201, r.text
    assert sorted(o["username"] for o in r.json()["items"]) == ["ana", "bob"]
    assert (await api.send("bob", ["claude@/srv/shop.fix-flaky-tests"], "")).status_code == 201
    r = await api.http.delete(f"{url}/bob", headers=api.auth("admin"))
    assert [o["username"] for o in r.json()["items"]] == ["ana"]
    # Only admins manage owners; an unknown user is a 400 naming the field.
    assert (
        await api.http.post(url, json={"name": "bob"}, headers=api.auth("ana"))
    ).status_code == 403
    bad = await api.http.post(url, json={"name": "nobody"}, headers=api.auth("admin"))
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "name"


async def test_the_admin_who_creates_an_agent_owns_it_by_default(api: Api) -> None:
    r = await api.http.post("/api/v1/admin/agents", json={"name": "pi"}, headers=api.auth("admin"))
    assert r.json()["owners"] == ["admin"]
    bad = await api.http.post(
        "/api/v1/admin/agents", json={"name": "pi2", "owners": ["ghost"]}, headers=api.auth("admin")
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "owners[0]"
    # Nothing half-written: the name is still free.
    ok = await api.http.post(
        "/api/v1/admin/agents", json={"name": "pi2"}, headers=api.auth("admin")
    )
    assert ok.status_code == 201
