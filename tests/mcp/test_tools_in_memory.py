"""Each tool's output, through the SDK's in-memory client, against a real gateway
app in-process (the MCP server's client reaches it over the ASGI transport)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mailui4agents.client import ClientConfig
from mailui4agents.client.config import read_config_file
from mailui4agents.mcp.runtime import Runtime
from tests.mcp.conftest import (
    READ_ONLY,
    TOOLS,
    WORKSPACE,
    InProcess,
    Scene,
    make_scene,
    memory_session,
    ok,
    refused,
)

pytestmark = pytest.mark.anyio


def runtime_for(
    inproc: InProcess, key: str, session_id: str | None, tmp_path: Path, **kw: object
) -> Runtime:
    return Runtime(
        ClientConfig(url="http://gw", key=key),
        session_id=session_id,
        config_file=tmp_path / "xdg" / "agentmail" / "config.json",
        transport=inproc.transport,
        **kw,  # type: ignore[arg-type]
    )


async def upload_as(scene: Scene, who: str, name: str, data: bytes) -> str:
    r = await scene.api.http.post(
        "/api/v1/attachments" if who != "claude" else "/api/v1/agent/attachments",
        files={"file": (name, data, "text/plain")},
        headers=scene.api.auth(who),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["attachment_id"])


async def test_the_server_lists_all_thirteen_tools_with_tolerant_schemas(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    async with memory_session(runtime_for(inproc, scene.key, scene.session_id, tmp_path)) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.annotations is not None, name
        assert tool.annotations.readOnlyHint is (name in READ_ONLY), name
        # A platform that injects `_ref` must not be told extra arguments are forbidden.
        assert tool.inputSchema.get("additionalProperties") is not False, name
        assert "session_id" not in tool.inputSchema.get("properties", {}), name
        assert tool.outputSchema is None, name  # plain text only
    assert tools["ask_human"].annotations.openWorldHint is True  # type: ignore[union-attr]


async def test_a_mail_reads_as_a_compact_header_with_the_reply_address_and_body(
    inproc: InProcess, tmp_path: Path
) -> None:
    await inproc.api.user("ana")
    key = await inproc.api.agent("claude")
    notes_id = await upload_as(
        Scene(inproc.api, key, {}), "ana", "notes.txt", b"line one\nline two\n"
    )
    r = await inproc.api.send(
        "ana",
        [f"claude@{WORKSPACE}.new"],
        subject="Fix the login",
        body="Please fix the login page.\nThe last requirement: keep the old URL.",
        attachment_ids=[notes_id],
    )
    assert r.status_code == 201, r.text
    first = r.json()
    scene = Scene(inproc.api, key, first)
    async with memory_session(runtime_for(inproc, key, scene.session_id, tmp_path)) as mcp:
        inbox = ok(await mcp.call_tool("read_inbox", {}))
        mail = ok(await mcp.call_tool("read_mail", {"mail_id": first["id"]}))
        short = ok(await mcp.call_tool("read_mail", {"mail_id": first["id"], "body_limit": 10}))
        after = ok(await mcp.call_tool("read_inbox", {}))

    reply_address = f"ana@{WORKSPACE}.{first['session_alias']}"
    assert inbox.startswith(f"1 unread mail in session {scene.session_id}, oldest first:")
    assert first["id"] in inbox and "subject 'Fix the login'" in inbox
    assert f"reply to {reply_address}" in inbox and "1 attachment(s)" in inbox
    assert "Please fix the login page." in inbox  # a preview line

    lines = mail.splitlines()
    assert lines[0].startswith(f"mail {first['id']} (message) — ")
    assert lines[1] == f"from: {reply_address} (human)"
    assert lines[2] == f"to: {scene.agent_address}"
    assert "subject: Fix the login" in lines
    assert (
        f"session: {first['session_alias']} (id {scene.session_id}, workspace {WORKSPACE})" in lines
    )
    assert (
        f"reply: send_mail(to=['{reply_address}'], parent_mail_id='{first['id']}') "
        "— use this address exactly"
    ) in lines
    assert "attachments (1):" in lines
    assert f"  - {notes_id}  notes.txt (18 B, text/plain)" in lines
    assert mail.endswith("Please fix the login page.\nThe last requirement: keep the old URL.")

    assert "\nPlease fix\n" in short and "[body truncated" in short
    assert after == "No unread mail in session " + scene.session_id + "."  # read_mail marked it


async def test_a_reply_with_an_uploaded_attachment_lands_in_the_thread(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    report = tmp_path / "report.md"
    report.write_text("# Fixed\nThe login works again.\n", encoding="utf-8")
    reply_to = f"ana@{WORKSPACE}.{scene.first['session_alias']}"
    async with memory_session(runtime_for(inproc, scene.key, scene.session_id, tmp_path)) as mcp:
        uploaded = ok(await mcp.call_tool("upload_attachment", {"path": str(report)}))
        attachment_id = uploaded.splitlines()[1].removeprefix("attachment_id: ")
        sent = ok(
            await mcp.call_tool(
                "send_mail",
                {
                    "to": reply_to,  # one string, not a list
                    "subject": "Re: Fix the login",
                    "body": "Done, see the report.",
                    "parent_mail_id": scene.first["id"],
                    "attachment_ids": json.dumps(json.dumps([attachment_id])),  # twice encoded
                },
            )
        )
        thread = ok(await mcp.call_tool("read_thread", {"mail_id": scene.first["id"]}))
        saved = ok(
            await mcp.call_tool(
                "download_attachment", {"attachment_id": attachment_id, "save_to": str(tmp_path)}
            )
        )

    assert uploaded.startswith("uploaded report.md (")
    assert sent.splitlines()[0].startswith("sent mail ") and sent.splitlines()[0].endswith(reply_to)
    assert f"session: {scene.first['session_alias']} (id {scene.session_id}" in sent
    assert f"  - {attachment_id}  report.md (" in sent

    assert thread.startswith(f"thread of session {scene.first['session_alias']}")
    assert ": 2 mail(s), oldest first" in thread.splitlines()[0]
    assert thread.index("Please fix the login page.") < thread.index("Done, see the report.")

    target = tmp_path / attachment_id
    assert saved.startswith(f"saved attachment {attachment_id} (")
    assert f"to {target}" in saved
    assert saved.endswith("content:\n# Fixed\nThe login works again.\n")
    assert target.read_text(encoding="utf-8") == "# Fixed\nThe login works again.\n"


async def test_forward_contacts_participants_suggestions_and_search_read_one_line_per_item(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api, body="The login page shows a blank screen.")
    await inproc.api.user("bob")
    async with memory_session(runtime_for(inproc, scene.key, scene.session_id, tmp_path)) as mcp:
        found = ok(await mcp.call_tool("search_mail", {"query": "blank"}))
        nothing = ok(await mcp.call_tool("search_mail", {"query": "zebra"}))
        contacts = ok(await mcp.call_tool("list_contacts", {}))
        people = ok(await mcp.call_tool("session_participants", {}))
        suggested = ok(await mcp.call_tool("suggest_address", {"partial": "an"}))
        forwarded = ok(
            await mcp.call_tool(
                "forward_mail",
                {"mail_id": scene.first["id"], "to": [f"bob@{WORKSPACE}.new"], "note": "FYI"},
            )
        )

    assert forwarded.startswith("forwarded: sent mail ") and f"bob@{WORKSPACE}" in forwarded
    assert "subject: Fwd: Fix the login" in forwarded

    assert contacts.splitlines()[0].endswith("contact(s):")
    assert any(line.startswith("ana (human) | last address ana@") for line in contacts.splitlines())

    alias = scene.first["session_alias"]
    assert people.splitlines()[0] == f"2 participant(s) of session {scene.session_id}:"
    assert f"ana (human) | address ana@{WORKSPACE}.{alias} | roles from | 1 mail(s) sent" in people
    assert f"claude (agent) | address claude@{WORKSPACE}.{alias} | roles to | not yet spoken" in (
        people
    )

    assert suggested.splitlines()[:3] == ["addresses matching 'an':", "names:", "  ana (human)"]

    assert found.splitlines()[0] == "1 mail(s) match 'blank':"
    assert f"{scene.first['id']} | " in found and "subject 'Fix the login'" in found
    assert "**blank**" in found  # the gateway's snippet marks the hit
    assert nothing == "No mail matches 'zebra'."


async def test_reads_outside_the_session_scope_are_tool_errors_with_the_gateways_message(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    r = await inproc.api.send("ana", ["claude@/srv/other.new"], subject="Elsewhere", body="secret")
    other = r.json()
    async with memory_session(runtime_for(inproc, scene.key, scene.session_id, tmp_path)) as mcp:
        outside = refused(await mcp.call_tool("read_mail", {"mail_id": other["id"]}))
        widened = ok(
            await mcp.call_tool("read_inbox", {"status": "all", "session_id": other["session_id"]})
        )
    assert outside == f"the gateway refused (404 not_found): mail '{other['id']}' not found"
    # The injected session_id is ignored: the inbox stays in the server's own scope.
    assert scene.first["id"] in widened and other["id"] not in widened


async def test_ask_human_without_a_mail_session_says_so_as_a_tool_error(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    async with memory_session(runtime_for(inproc, scene.key, None, tmp_path)) as mcp:
        result = refused(await mcp.call_tool("ask_human", {"question": "Which branch?"}))
        people = refused(await mcp.call_tool("session_participants", {}))
    assert "AGENTMAIL_SESSION_ID is not set" in result
    assert "AGENTMAIL_SESSION_ID is not set" in people


async def test_without_an_agent_key_every_tool_says_how_to_connect(
    inproc: InProcess, tmp_path: Path
) -> None:
    runtime = Runtime(ClientConfig(url="http://gw"), transport=inproc.transport)
    async with memory_session(runtime) as mcp:
        result = refused(await mcp.call_tool("read_inbox", {}))
    assert result.startswith("not connected: this MCP server has no agent key.")
    assert "connect_to_server" in result


async def test_connect_to_server_saves_only_coordinates_the_gateway_accepted(
    inproc: InProcess, tmp_path: Path
) -> None:
    scene = await make_scene(inproc.api)
    runtime = Runtime(
        ClientConfig(url="http://gw"),
        session_id=scene.session_id,
        config_file=tmp_path / "xdg" / "agentmail" / "config.json",
        transport=inproc.transport,
    )
    async with memory_session(runtime) as mcp:
        wrong = refused(
            await mcp.call_tool("connect_to_server", {"url": "http://gw", "key": "am_agent_nope"})
        )
        assert not runtime.config_file.exists()
        assert not runtime.config.is_agent
        right = ok(
            await mcp.call_tool("connect_to_server", {"url": "http://gw/", "key": scene.key})
        )
        inbox = ok(await mcp.call_tool("read_inbox", {}))

    assert wrong.startswith("not connected, nothing saved: the gateway at http://gw refused:")
    assert right.splitlines() == ["connected to http://gw", f"- saved to {runtime.config_file}"]
    assert read_config_file(runtime.config_file) == {"url": "http://gw", "key": scene.key}
    assert stat.S_IMODE(runtime.config_file.stat().st_mode) == 0o600
    assert scene.first["id"] in inbox  # the running server switched to the new key
