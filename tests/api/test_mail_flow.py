"""Sending, routing and reading mail through the human and agent routes."""

from __future__ import annotations

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_mail_to_new_session_gets_its_alias_at_once(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug")
    assert r.status_code == 201, r.text
    mail = r.json()
    assert mail["session_alias"] == "claude-fix-login-bug"
    assert mail["workspace"] == "/srv/shop"
    assert mail["to"] == ["claude@/srv/shop.claude-fix-login-bug"]
    assert mail["from"] == "ana@/srv/shop.claude-fix-login-bug"
    assert mail["reply_address"] == "claude@/srv/shop.claude-fix-login-bug"
    assert mail["self_address"] == "ana@/srv/shop.claude-fix-login-bug"


async def test_agent_inbox_row_carries_reply_and_self_address(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    await api.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug", body="details")
    r = await api.http.get("/api/v1/agent/inbox", headers=api.auth("claude"))
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert item["from_human"] is True
    assert item["reply_address"] == "ana@/srv/shop.claude-fix-login-bug"
    assert item["self_address"] == "claude@/srv/shop.claude-fix-login-bug"
    assert item["body"] == "details"
    assert item["permission_mode"] == "workspace"
