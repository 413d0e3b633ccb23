"""The `schedule_mail` tool: an agent schedules mail in its session, through the
SDK's in-memory client against the gateway app in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.conftest import InProcess, make_scene, memory_session, ok, refused
from tests.mcp.test_tools_in_memory import runtime_for

pytestmark = pytest.mark.anyio


async def test_schedule_mail_creates_an_entry_of_the_agent_with_tolerant_addresses(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    reply_to = f"ana@/srv/shop.{scene.first['session_alias']}"
    async with memory_session(runtime_for(inproc, scene.key, scene.session_id, tmp_path)) as mcp:
        text = ok(
            await mcp.call_tool(
                "schedule_mail",
                {
                    "to": reply_to,  # one string, not a list
                    "subject": "reminder",
                    "body": "the release is today",
                    "start_at": "2027-03-26T09:00",
                    "timezone": "Europe/Berlin",
                    "rrule": "FREQ=DAILY;COUNT=3",
                },
            )
        )
        bad = refused(
            await mcp.call_tool(
                "schedule_mail",
                {"to": [reply_to], "subject": "s", "body": "b", "start_at": "next tuesday"},
            )
        )
    assert "2027-03-26T08:00:00Z, 2027-03-27T08:00:00Z, 2027-03-28T07:00:00Z" in text
    assert "start_at" in bad
    r = await inproc.api.http.get("/api/v1/agent/calendar", headers=inproc.api.auth("claude"))
    [entry] = r.json()["items"]
    assert entry["created_by"] == "claude" and entry["to"] == [reply_to]
    assert entry["from_session_id"] == scene.session_id  # the session the agent works in
    assert entry["id"] in text
