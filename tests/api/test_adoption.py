"""Adopting an agent platform's own session by mail (SPEC §4.4)."""

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
    await api.agent("claude")
    await api.user("ana")
    await api.user("bob")
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
