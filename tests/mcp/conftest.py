"""Helpers for the MCP server tests: a scripted gateway scene, MCP client sessions
(in memory, or over stdio with `agentmail mcp` as a real subprocess)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult, TextContent

from mailui4agents.domain.policy import MAIL_TOOL_NAMES
from mailui4agents.mcp.runtime import Runtime
from mailui4agents.mcp.server import build_server
from mailui4agents.settings import Settings
from mailui4agents.testing import clean_env
from tests.conftest import ADMIN_PASSWORD, Api, started_app

# The hook policy's list of our mail tools (always allowed, even in plan mode) and
# the tools this server offers must be the same set: one source, checked here.
TOOLS = set(MAIL_TOOL_NAMES)
READ_ONLY = {
    "read_inbox",
    "read_mail",
    "read_thread",
    "suggest_address",
    "list_contacts",
    "session_participants",
    "search_mail",
}
WORKSPACE = "/srv/shop"


@dataclass
class Scene:
    """A human (ana) who started a session with an agent (claude) by mail."""

    api: Api
    key: str  # claude's agent key
    first: dict[str, Any]  # ana's first mail, as ana sees it

    @property
    def session_id(self) -> str:
        return str(self.first["session_id"])

    @property
    def agent_address(self) -> str:
        """Where ana's mail into this session goes: claude's address in it."""
        return str(self.first["to"][0])


async def make_scene(api: Api, body: str = "Please fix the login page.") -> Scene:
    await api.user("ana")
    key = await api.agent("claude")
    r = await api.send("ana", [f"claude@{WORKSPACE}.new"], subject="Fix the login", body=body)
    assert r.status_code == 201, r.text
    return Scene(api, key, r.json())


def text(result: CallToolResult) -> str:
    """The text of a tool result (our tools answer with one text block)."""
    assert result.content, result
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def ok(result: CallToolResult) -> str:
    assert not result.isError, text(result)
    return text(result)


def refused(result: CallToolResult) -> str:
    assert result.isError, f"expected a tool error, got success: {text(result)}"
    return text(result)


# -- in process --------------------------------------------------------------------------------


@dataclass
class InProcess:
    api: Api
    transport: httpx.AsyncBaseTransport


@pytest.fixture
async def inproc(settings: Settings) -> AsyncIterator[InProcess]:
    """The gateway app in-process; its ASGI transport serves both the test and the MCP client."""
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            yield InProcess(api, transport)


@asynccontextmanager
async def memory_session(runtime: Runtime) -> AsyncIterator[ClientSession]:
    """An MCP client connected in memory to a server built around ``runtime``."""
    async with create_connected_server_and_client_session(build_server(runtime)) as session:
        yield session


# -- a real subprocess -------------------------------------------------------------------------


@asynccontextmanager
async def stdio_session(env: Mapping[str, str], errlog_path: Path) -> AsyncIterator[ClientSession]:
    """`agentmail mcp` started as a subprocess, driven by the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mailui4agents.cli.main", "mcp"],
        env=clean_env(**env),
    )
    with errlog_path.open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
