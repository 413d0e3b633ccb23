"""Gateway behaviour the hooks depend on: relay keys belong to one agent, and a
request's summary is masked like its tool input."""

from __future__ import annotations

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def ask(
    api: Api, agent: str, session_id: str, key: str, **extra: object
) -> dict[str, object]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": session_id, "tool_name": "Bash", "relay_key": key, **extra},
        headers=api.auth(agent),
    )
    return {"status_code": r.status_code, **r.json()}


async def test_another_agents_relay_key_is_not_a_duplicate_and_leaks_nothing(api: Api) -> None:
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    mine = (await api.send("ana", ["claude@/srv/a.new"], subject="a")).json()["session_id"]
    first = await ask(api, "claude", mine, "hook:claude-code:s:toolu_1")
    assert first["status_code"] == 201
    # codex, not a participant of claude's session, reuses the key there.
    other = await ask(api, "codex", mine, "hook:claude-code:s:toolu_1")
    assert other["status_code"] == 404
    first_id = first["id"]
    assert isinstance(first_id, str) and first_id not in str(other)


async def test_a_secret_in_the_summary_is_masked_in_the_mail(api: Api) -> None:
    await api.agent("claude")
    await api.user("ana")
    session = (await api.send("ana", ["claude@/srv/a.new"], subject="a")).json()["session_id"]
    secret = "deploy --token=s3cr3tvalue123"
    created = await ask(api, "claude", session, "k", tool_input={"command": secret}, summary=secret)
    assert created["status_code"] == 201
    mailbox = await api.http.get("/api/v1/mailbox?status=all", headers=api.auth("ana"))
    [mail] = [m for m in mailbox.json()["items"] if m["type"] == "permission_request"]
    assert "s3cr3tvalue123" not in mail["subject"] + mail["body"]
