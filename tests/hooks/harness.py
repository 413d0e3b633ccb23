"""Run real `agentmail hook <platform>` subprocesses and act as the human.

Each hook is a real process fed the platform's documented stdin JSON; the human
decides through the HTTP API. Nothing sleeps or polls to synchronise: the human
waits on its own event stream (with a deadline) to learn when a request arrived.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import TaskGroup

from mailui4agents.testing import clean_env
from tests.sse import Got, collect

HOOK_DEADLINE_S = 30.0


@dataclass
class HookRun:
    """A finished hook process."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def claude_input(
    tool_name: str = "Bash",
    tool_input: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    tool_use_id: str | None = None,
    cwd: str = "/srv/shop",
) -> dict[str, Any]:
    """Claude Code's PreToolUse stdin (docs/api.md#hook-contracts)."""
    sid = session_id or str(uuid.uuid4())
    if tool_input is None:
        tool_input = {
            "command": "npm test",
            "description": "Run test suite",
            "timeout": 120000,
            "run_in_background": False,
        }
    return {
        "session_id": sid,
        "prompt_id": str(uuid.uuid4()),
        "transcript_path": f"/home/u/.claude/projects/-srv-shop/{sid}.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": tool_use_id or f"toolu_01{uuid.uuid4().hex}",
        "effort": {"level": "high"},
    }


def zcode_input(
    tool_name: str = "Bash",
    tool_input: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    cwd: str = "/srv/shop",
) -> dict[str, Any]:
    """ZCode's hook stdin (docs/api.md#hook-contracts)."""
    data: dict[str, Any] = {
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input if tool_input is not None else {"command": "npm test"},
        "permission_mode": "default",
        "cwd": cwd,
    }
    if session_id is not None:
        data["session_id"] = session_id
    return data


def gemini_input(
    tool_name: str = "run_shell_command",
    tool_input: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    cwd: str = "/srv/shop",
) -> dict[str, Any]:
    """Gemini CLI's BeforeTool stdin (docs/api.md#hook-contracts)."""
    sid = session_id or str(uuid.uuid4())
    return {
        "session_id": sid,
        "transcript_path": f"/home/u/.gemini/tmp/{sid}/chats/session.json",
        "cwd": cwd,
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-09-01T10:00:00.000Z",
        "tool_name": tool_name,
        "tool_input": tool_input if tool_input is not None else {"command": "npm test"},
    }


def hook_env(url: str, key: str, home: Path, data_dir: Path) -> dict[str, str]:
    """A hook's environment: this process's, without AGENTMAIL_* settings, plus
    the gateway's coordinates and a home dir of the test's own."""
    return clean_env(
        AGENTMAIL_URL=url,
        AGENTMAIL_KEY=key,
        AGENTMAIL_DATA_DIR=str(data_dir),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
    )


async def run_hook(
    platform: str, payload: dict[str, Any] | str, env: dict[str, str], cwd: Path
) -> HookRun:
    """Run one hook to completion (bounded by HOOK_DEADLINE_S)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    with anyio.fail_after(HOOK_DEADLINE_S):
        done = await anyio.run_process(
            [sys.executable, "-m", "mailui4agents.cli.main", "hook", platform],
            input=data.encode(),
            env=env,
            cwd=cwd,
            check=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    return HookRun(done.returncode, done.stdout.decode(), done.stderr.decode())


@dataclass
class Spawned:
    """A hook running in the background while the test plays the human."""

    finished: anyio.Event = field(default_factory=anyio.Event)
    run: HookRun | None = None

    async def result(self) -> HookRun:
        with anyio.fail_after(HOOK_DEADLINE_S):
            await self.finished.wait()
        assert self.run is not None
        return self.run


def spawn(
    tasks: TaskGroup,
    platform: str,
    payload: dict[str, Any],
    env: dict[str, str],
    cwd: Path,
) -> Spawned:
    spawned = Spawned()

    async def go() -> None:
        spawned.run = await run_hook(platform, payload, env, cwd)
        spawned.finished.set()

    tasks.start_soon(go)
    return spawned


async def run_many(
    calls: list[tuple[str, dict[str, Any] | str, dict[str, str]]], cwd: Path
) -> list[HookRun]:
    """Run independent hooks at the same time; results in the order given."""
    results: list[HookRun | None] = [None] * len(calls)

    async def one(
        i: int, platform: str, payload: dict[str, Any] | str, env: dict[str, str]
    ) -> None:
        results[i] = await run_hook(platform, payload, env, cwd)

    async with anyio.create_task_group() as tasks:
        for i, (platform, payload, env) in enumerate(calls):
            tasks.start_soon(one, i, platform, payload, env)
    return [r for r in results if r is not None]


@dataclass
class Human:
    """The human side, over the gateway's HTTP API."""

    http: httpx.AsyncClient
    tokens: dict[str, str]

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    async def new_session(
        self, mode: str = "workspace", *, agent: str = "claude", sender: str = "ana"
    ) -> str:
        """A new session in /srv/shop started by `sender` mailing `agent` (an
        agent sender: from a session ana started with it, docs/access.md)."""
        body: dict[str, Any] = {
            "to": [f"{agent}@/srv/shop.new"],
            "subject": f"task {uuid.uuid4().hex[:8]}",
            "body": "please",
        }
        human = self.tokens[sender].startswith("am_user_")
        if human:
            body["permission_mode"] = mode
        else:
            body["from_session_id"] = await self.new_session(agent=sender)
        path = "/api/v1/mail" if human else "/api/v1/agent/mail"
        r = await self.http.post(path, json=body, headers=self.auth(sender))
        assert r.status_code == 201, r.text
        return str(r.json()["session_id"])

    async def set_mode(self, session_id: str, mode: str) -> None:
        r = await self.http.patch(
            f"/api/v1/sessions/{session_id}",
            json={"permission_mode": mode},
            headers=self.auth("ana"),
        )
        assert r.status_code == 200, r.text

    async def permissions(
        self, session_id: str, status: str | None = None, who: str = "ana"
    ) -> list[dict[str, Any]]:
        params = {"session_id": session_id, **({"status": status} if status else {})}
        r = await self.http.get("/api/v1/permissions", params=params, headers=self.auth(who))
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    async def wait_pending(
        self, session_id: str, count: int = 1, deadline: float = 15.0
    ) -> list[dict[str, Any]]:
        """The session's pending requests once there are `count` of them: waits on
        ana's event stream (replayed from the start, so nothing is missed) for
        `count` requests other than those already closed."""
        closed = {p["id"] for p in await self.permissions(session_id) if p["status"] != "pending"}

        def seen(got: list[Got]) -> bool:
            asked = [g.data for g in got if g.type == "permission_request"]
            mine = [a for a in asked if a["session_id"] == session_id and a["id"] not in closed]
            return len(mine) >= count

        await collect(
            self.http, "/api/v1/events", self.tokens["ana"], until=seen, last_event_id=0,
            deadline=deadline,
        )  # fmt: skip
        return [p for p in await self.permissions(session_id) if p["status"] == "pending"]

    async def decide(self, request_id: str, decision: str, **extra: Any) -> dict[str, Any]:
        r = await self.http.post(
            f"/api/v1/permissions/{request_id}/decision",
            json={"decision": decision, **extra},
            headers=self.auth("ana"),
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def mails(self, session_id: str, who: str = "ana") -> list[dict[str, Any]]:
        r = await self.http.get(
            "/api/v1/mailbox",
            params={"status": "all", "session_id": session_id, "limit": 500},
            headers=self.auth(who),
        )
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    async def wait_bound_session(self, platform_id: str, deadline: float = 15.0) -> dict[str, Any]:
        """The human's session bound to this platform session, once it exists: its
        first mail (type system) wakes ana's event stream; no polling."""

        def system_mail(got: list[Got]) -> bool:
            return any(g.type == "new_mail" and g.data["type"] == "system" for g in got)

        last = 0
        with anyio.fail_after(deadline):
            while True:
                bound = [s for s in await self.sessions() if s["platform_id"] == platform_id]
                if bound:
                    [session] = bound
                    return session
                got = await collect(
                    self.http, "/api/v1/events", self.tokens["ana"], until=system_mail,
                    last_event_id=last, deadline=deadline,
                )  # fmt: skip
                last = got[-1].id

    async def sessions(self, who: str = "ana") -> list[dict[str, Any]]:
        r = await self.http.get("/api/v1/sessions", params={"limit": 500}, headers=self.auth(who))
        assert r.status_code == 200, r.text
        return list(r.json()["items"])
