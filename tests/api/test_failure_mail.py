"""Agents (bridges) may mark a mail as a failure notice; nothing else is accepted."""

from __future__ import annotations

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_an_agent_can_send_a_failure_mail_and_only_message_or_failure(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], "task", "do it")
    assert r.status_code == 201, r.text
    task = r.json()
    r = await api.send(
        "claude", [task["reply_address"]] if task.get("reply_address") else ["ana@/srv/shop"],
        "Failed: task", "the CLI is missing", parent_mail_id=task["id"], type="failure",
        relay=True, relay_key="bridge:claude:failure:cli_missing:" + task["id"],
    )  # fmt: skip
    assert r.status_code == 201, r.text
    assert r.json()["type"] == "failure"
    r = await api.send("claude", ["ana@/srv/shop"], "s", "b", parent_mail_id=task["id"])
    assert r.json()["type"] == "message"
    for wrong in ("relay", "permission_decision", "FAILURE"):
        r = await api.send("claude", ["ana@/srv/shop"], "s", "b", type=wrong)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "type"
    # People cannot send it at all (their mail shape has no type).
    r = await api.send("ana", ["claude@/srv/shop"], "s", "b", type="failure")
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_field"
