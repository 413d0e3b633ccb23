"""`agentmail mcp` as a real subprocess, driven by the SDK's stdio client, against
a real gateway subprocess. People are scripted through the gateway's HTTP API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.types import CallToolResult

from mailui4agents.testing import GatewayProcess
from tests.conftest import Api
from tests.mcp.conftest import (
    READ_ONLY,
    TOOLS,
    WORKSPACE,
    Scene,
    make_scene,
    ok,
    refused,
    stdio_session,
)
from tests.sse import collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DEADLINE_S = 30.0


@asynccontextmanager
async def agent_mcp(
    gateway: GatewayProcess, scene: Scene, tmp_path: Path, **extra_env: str
) -> AsyncIterator[ClientSession]:
    env = {
        "AGENTMAIL_URL": gateway.url,
        "AGENTMAIL_KEY": scene.key,
        "AGENTMAIL_SESSION_ID": scene.session_id,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        **extra_env,
    }
    async with stdio_session(env, tmp_path / "mcp-stderr.log") as session:
        yield session


async def answer_pending_question(
    api: Api,
    ask: Any,
    *,
    decision: str = "approve",
    answers: list[str] | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """As ana: open her event stream, let the agent ask (``ask`` starts the call), wait
    for the question to reach her, find it among her pending requests, and decide."""
    events = await collect(
        api.http,
        "/api/v1/events",
        api.tokens["ana"],
        until=lambda got: any(e.type == "permission_request" for e in got),
        on_open=ask,
        deadline=DEADLINE_S,
    )
    asked = next(e.data for e in events if e.type == "permission_request")
    r = await api.http.get(
        "/api/v1/permissions", params={"status": "pending"}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    pending: dict[str, dict[str, Any]] = {item["id"]: item for item in r.json()["items"]}
    assert asked["id"] in pending
    question = pending[asked["id"]]
    body: dict[str, Any] = {"decision": decision}
    if answers is not None:
        body["answers"] = answers
    if note is not None:
        body["note"] = note
    r = await api.http.post(
        f"/api/v1/permissions/{question['id']}/decision", json=body, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    return question


async def call_while_human_decides(
    mcp: ClientSession, api: Api, arguments: dict[str, Any], **decide: Any
) -> tuple[CallToolResult, dict[str, Any]]:
    results: list[CallToolResult] = []
    with anyio.fail_after(DEADLINE_S):
        async with anyio.create_task_group() as tasks:

            async def call() -> None:
                results.append(await mcp.call_tool("ask_human", arguments))

            def start_asking() -> None:  # not awaited by `collect`: it runs alongside
                tasks.start_soon(call)

            question = await answer_pending_question(api, start_asking, **decide)
    return results[0], question


async def test_the_subprocess_lists_all_thirteen_tools_with_the_right_annotations(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        tools = (await mcp.list_tools()).tools
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert tool.annotations is not None
        assert tool.annotations.readOnlyHint is (tool.name in READ_ONLY), tool.name


async def test_an_agent_mails_a_human_and_reads_her_reply_within_its_session(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    reply_to = f"ana@{WORKSPACE}.{scene.first['session_alias']}"
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        sent = ok(
            await mcp.call_tool(
                "send_mail",
                {
                    "to": [reply_to],
                    "subject": "Re: Fix the login",
                    "body": "Which browser shows the blank page?",
                    "parent_mail_id": scene.first["id"],
                },
            )
        )
        sent_id = sent.split()[2]
        r = await live.send(
            "ana",
            [scene.agent_address],
            subject="Re: Re: Fix the login",
            body="Firefox 128 on Linux.",
            parent_mail_id=sent_id,
        )
        assert r.status_code == 201, r.text
        answer = r.json()
        inbox = ok(await mcp.call_tool("read_inbox", {}))
        mail = ok(await mcp.call_tool("read_mail", {"mail_id": answer["id"]}))

    assert sent.startswith(f"sent mail {sent_id} to {reply_to}")
    assert answer["session_id"] == scene.session_id  # the reply stayed in the session
    assert answer["id"] in inbox and "Firefox 128 on Linux." in inbox
    assert f"from: {reply_to} (human)" in mail
    assert f"in reply to: {sent_id}" in mail
    assert mail.endswith("Firefox 128 on Linux.")


async def test_ask_human_returns_the_answer_a_human_picked(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        result, question = await call_while_human_decides(
            mcp,
            live,
            {"question": "Which branch?", "options": ["main", "release"], "_ref": "call-1"},
            answers=["release"],
        )
    assert ok(result) == "ana answered through the API: release"
    assert question["kind"] == "question" and question["question"] == "Which branch?"
    assert question["session_id"] == scene.session_id
    assert [o["label"] for o in question["options"]] == ["main", "release"]
    assert question["relay_key"].startswith(f"mcp:ask:{scene.session_id}:")


async def test_ask_human_reports_a_refusal_with_the_humans_note(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        result, _ = await call_while_human_decides(
            mcp, live, {"question": "May I drop the table?"}, decision="deny", note="never"
        )
    assert refused(result) == "the human refused (denied by ana through the API): never"


async def test_ask_human_says_it_timed_out_when_nobody_answers(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    async with agent_mcp(gateway_process, scene, tmp_path, AGENTMAIL_ASK_TIMEOUT="2") as mcp:
        with anyio.fail_after(DEADLINE_S):
            result = await mcp.call_tool("ask_human", {"question": "Anyone there?"})
    message = refused(result)
    assert message.startswith("timed out waiting for an answer after 2 s")
    assert "refused" not in message


async def test_a_read_outside_the_scope_is_a_tool_error_with_the_gateways_message(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    r = await live.send("ana", ["claude@/srv/other.new"], subject="Elsewhere", body="secret")
    other = r.json()
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        result = await mcp.call_tool("read_mail", {"mail_id": other["id"]})
        thread = await mcp.call_tool("read_thread", {"mail_id": other["id"]})
    assert refused(result) == f"the gateway refused (404 not_found): mail '{other['id']}' not found"
    assert "not found" in refused(thread)


async def test_injected_extra_arguments_are_accepted_and_cannot_widen_the_scope(
    live: Api, gateway_process: GatewayProcess, tmp_path: Path
) -> None:
    scene = await make_scene(live)
    r = await live.send("ana", ["claude@/srv/other.new"], subject="Elsewhere", body="secret")
    other = r.json()
    async with agent_mcp(gateway_process, scene, tmp_path) as mcp:
        inbox = ok(
            await mcp.call_tool(
                "read_inbox",
                {"_ref": "toolu_01", "session_id": other["session_id"], "status": "all"},
            )
        )
        mail = ok(
            await mcp.call_tool(
                "read_mail",
                {"mail_id": scene.first["id"], "_ref": "toolu_02", "workspace": "/srv/other"},
            )
        )
    assert scene.first["id"] in inbox and other["id"] not in inbox
    assert "secret" not in inbox
    assert mail.endswith("Please fix the login page.")
