"""`agentmail mcp --channel` (mcp/channel.py) as a real subprocess over stdio,
driven by the MCP SDK's client playing Claude Code's side of the channel
protocol, against a real gateway (tests/live_app.py) with real hook subprocesses.

Claude Code's process tree is imitated: the server runs under a parent whose
command line names `--dangerously-load-development-channels server:agentmail`,
as `claude` started so would be; without it the server claims no mail. The
SDK's ClientSession drops notifications it does not know, so the test reads
the stream under it (as Claude Code's own handler does) and writes
`permission_request` notifications straight onto it."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, JSONRPCNotification

from mailui4agents.hooks.race import relay_key_prefix
from tests.e2e.test_mail_in_e2e import event, mail_to_session
from tests.e2e.test_waiting_e2e import CC, World, pushsvc, settings, world
from tests.hooks.harness import HookRun, run_hook
from tests.sse import collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

__all__ = ["pushsvc", "settings", "world"]  # fixtures, imported for these tests

DEADLINE_S = 30.0
MESSAGE = "notifications/claude/channel"
ANSWER = "notifications/claude/channel/permission"
REQUEST = "notifications/claude/channel/permission_request"
# Claude Code's stand-in: a parent process whose command line names the channel.
PARENT = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[3:]))"
DEV_FLAG = ["--dangerously-load-development-channels", "server:agentmail"]


@dataclass
class Log:
    """The server's stderr, read line by line in a thread."""

    lines: list[str] = field(default_factory=list)
    grown: threading.Condition = field(default_factory=threading.Condition)

    def read(self, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
            for line in f:
                with self.grown:
                    self.lines.append(line)
                    self.grown.notify_all()

    def text(self) -> str:
        with self.grown:
            return "".join(self.lines)

    async def wait_for(self, text: str) -> None:
        def wait() -> bool:
            with self.grown:
                return self.grown.wait_for(lambda: text in "".join(self.lines), DEADLINE_S)

        assert await anyio.to_thread.run_sync(wait), f"never logged {text!r}: {self.text()}"


@dataclass
class Claude:
    """Claude Code's side: the MCP session, and the channel notifications it got."""

    session: ClientSession
    write: MemoryObjectSendStream[SessionMessage]
    got: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    log: Log = field(default_factory=Log)

    async def send(self, method: str, params: Any) -> None:
        note = JSONRPCNotification(jsonrpc="2.0", method=method, params=params)
        await self.write.send(SessionMessage(JSONRPCMessage(note)))

    def arrived(self, method: str, params: dict[str, Any]) -> None:
        self.got.append((method, params))
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(
        self, found: Callable[[list[tuple[str, dict[str, Any]]]], bool]
    ) -> list[tuple[str, dict[str, Any]]]:
        with anyio.fail_after(DEADLINE_S):
            while not found(self.got):
                await self.changed.wait()
        return self.got

    def messages(self) -> list[dict[str, Any]]:
        return [params for method, params in self.got if method == MESSAGE]

    def answers(self) -> list[dict[str, Any]]:
        return [params for method, params in self.got if method == ANSWER]


async def _tee(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    out: MemoryObjectSendStream[SessionMessage | Exception],
    claude: list[Claude],
) -> None:
    async with out:
        async for message in read:
            if isinstance(message, SessionMessage):
                root = message.message.root
                if isinstance(root, JSONRPCNotification) and root.method.startswith(MESSAGE):
                    claude[0].arrived(root.method, dict(root.params or {}))
                    continue
            await out.send(message)


def channel_env(
    world: World, agent: str = "claude", *, rollout: bool = True, **extra: str
) -> dict[str, str]:
    """The server's environment as Claude Code gives it. ``rollout``: Claude Code's
    cached rollout flag for channels is on in its config file (test-only: Anthropic's
    servers set it for an account; docs/platforms.md)."""
    home = world.tmp / "home"
    config = {"cachedGrowthBookFeatures": {"tengu_harbor": rollout}}
    (home / ".claude.json").write_text(json.dumps(config))
    return {
        **world.env(agent),
        "CLAUDE_CODE_SESSION_ID": world.platform_id,
        "CLAUDE_PROJECT_DIR": str(world.shop),
        "AGENTMAIL_HOOK_TIMEOUT": "20",
        **extra,
    }


@asynccontextmanager
async def channel(
    world: World, *, named: bool = True, env: dict[str, str] | None = None
) -> AsyncIterator[Claude]:
    server = [sys.executable, "-m", "mailui4agents.cli.main", "mcp", "--channel"]
    args = ["-c", PARENT, *(DEV_FLAG if named else ["--no-channels", "-"]), *server]
    params = StdioServerParameters(
        command=sys.executable, args=args, env=env or channel_env(world), cwd=str(world.shop)
    )
    log = Log()
    r, w = os.pipe()
    reader = threading.Thread(target=log.read, args=(r,), daemon=True)
    reader.start()
    try:
        with os.fdopen(w, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                inner_send, inner_read = anyio.create_memory_object_stream[
                    SessionMessage | Exception
                ](16)
                holder: list[Claude] = []
                async with anyio.create_task_group() as tasks:
                    async with ClientSession(inner_read, write) as session:
                        claude = Claude(session, write, log=log)
                        holder.append(claude)
                        tasks.start_soon(_tee, read, inner_send, holder)
                        with anyio.fail_after(DEADLINE_S):
                            init = await session.initialize()
                        experimental = init.capabilities.experimental or {}
                        assert set(experimental) >= {"claude/channel", "claude/channel/permission"}
                        yield claude
                    tasks.cancel_scope.cancel()
    finally:
        reader.join(timeout=5)


async def ready(world: World, claude: Claude) -> None:
    """Wait until the channel delivers mail: a first mail arrives as a message."""
    mail_id = await mail_to_session(world, "warm-up")
    await claude.wait_for(lambda _: any(m["meta"].get("mail_id") == mail_id
                                        for m in claude.messages()))  # fmt: skip


def delivered(claude: Claude, mail_id: str) -> list[dict[str, Any]]:
    return [m for m in claude.messages() if m["meta"].get("mail_id") == mail_id]


async def test_a_persons_mail_arrives_as_one_channel_message_with_safe_meta(world: World) -> None:
    async with channel(world) as claude:
        await ready(world, claude)
        sent = time.monotonic()
        mail_id = await mail_to_session(world, "please also bump the version")
        await claude.wait_for(lambda _: bool(delivered(claude, mail_id)))
        print(f"channel message {time.monotonic() - sent:.3f} s after the send")  # a figure
        # Claimed: the Stop hook that runs next finds nothing left to hand over.
        stop = await run_hook(CC, event(world, "Stop"), world.env(), world.shop)
    [message] = delivered(claude, mail_id)
    assert "please also bump the version" in message["content"]
    assert "send_mail" in message["content"] and mail_id in message["content"]
    meta = message["meta"]
    assert meta["from"].startswith("ana@") and meta["subject"] == "more"
    assert meta["session_id"] == await world.session_id()
    assert all(key.isidentifier() and isinstance(v, str) for key, v in meta.items())
    assert stop.stdout == ""


async def test_a_stop_hook_racing_the_channel_never_delivers_a_mail_twice(world: World) -> None:
    async with channel(world) as claude:
        await ready(world, claude)
        hooks: list[HookRun] = []
        bodies = [f"race number {n}" for n in range(3)]

        async def stop() -> None:
            hooks.append(await run_hook(CC, event(world, "Stop"), world.env(), world.shop))

        ids = []
        async with anyio.create_task_group() as tasks:
            for body in bodies:
                ids.append(await mail_to_session(world, body))
                tasks.start_soon(stop)
                tasks.start_soon(stop)
        # The channel's sweeps run in order: once a later mail has arrived as a
        # message, every earlier one was claimed by someone.
        last = await mail_to_session(world, "the sync point")
        await claude.wait_for(lambda _: bool(delivered(claude, last)))
    for mail_id, body in zip(ids, bodies, strict=True):
        by_hook = [h for h in hooks if body in h.stdout]
        assert len(delivered(claude, mail_id)) + len(by_hook) == 1, (mail_id, hooks)


async def test_no_mail_of_another_session_or_agent_and_none_from_an_agent(world: World) -> None:
    async with channel(world) as claude:
        await ready(world, claude)
        session_id = await world.session_id()
        # Ana's mail to claude in another session (a new one) ...
        r = await world.api.send(
            "ana", [f"claude@{world.shop}.new"], subject="elsewhere", body="not for this channel"
        )
        assert r.status_code == 201, r.text
        elsewhere = r.json()["id"]
        # ... to another agent in a session of its own ...
        r = await world.api.send(
            "ana", [f"other@{world.shop}.new"], subject="for other", body="other's work"
        )
        assert r.status_code == 201, r.text
        # ... and an agent's mail into this very session: none of it is handed over.
        r = await world.api.http.get(
            f"/api/v1/sessions/{session_id}", headers=world.api.auth("ana")
        )
        alias = r.json()["alias"]
        r = await world.api.send(  # codex joins the session (a person's mail: delivered)
            "ana", [f"claude@{world.shop}.{alias}", f"codex@{world.shop}.{alias}"],
            subject="joining", body="codex, help claude",
        )  # fmt: skip
        assert r.status_code == 201, r.text
        r = await world.api.http.post(
            "/api/v1/agent/mail",
            json={"to": [f"claude@{world.shop}.{alias}"], "subject": "bot", "body": "from a bot"},
            headers=world.api.auth("codex"),
        )
        assert r.status_code == 201, r.text
        from_agent = r.json()["id"]
        last = await mail_to_session(world, "the sync point")
        await claude.wait_for(lambda _: bool(delivered(claude, last)))
    texts = " ".join(m["content"] for m in claude.messages())
    assert "not for this channel" not in texts and "other's work" not in texts
    assert "from a bot" not in texts
    assert not delivered(claude, elsewhere)
    assert not delivered(claude, from_agent)
    assert "codex, help claude" in texts  # the person's mail in the session did arrive
    assert {m["meta"]["session_id"] for m in claude.messages()} == {session_id}


@pytest.mark.parametrize(
    ("named", "rollout", "logged"),
    [
        (False, True, "not started with --dangerously-load-development-channels server:agentmail"),
        (True, False, "rollout flag for channels (tengu_harbor) is not on"),
    ],
)
async def test_when_claude_code_would_ignore_the_channel_no_mail_is_claimed(
    world: World, named: bool, rollout: bool, logged: str
) -> None:
    env = channel_env(world, rollout=rollout)
    async with channel(world, named=named, env=env) as claude:
        await claude.log.wait_for(logged)
        await mail_to_session(world, "for the hook, not the channel")
        # The Stop hook still finds it unread: the channel left it alone.
        stop = await run_hook(CC, event(world, "Stop"), world.env(), world.shop)
    assert "for the hook, not the channel" in json.loads(stop.stdout)["reason"]
    assert claude.messages() == []


def _request(request_id: str, command: str = "npm test") -> dict[str, Any]:
    return {
        "request_id": request_id,
        "tool_name": "Bash",
        "description": "Run the test suite",
        "input_preview": json.dumps({"command": command}),
    }


async def asked(world: World, claude: Claude, params: dict[str, Any]) -> dict[str, Any]:
    """Send a permission_request as Claude Code; the request as ana sees it."""
    events = await collect(
        world.api.http,
        "/api/v1/events",
        world.api.tokens["ana"],
        until=lambda got: any(e.type == "permission_request" for e in got),
        on_open=lambda: claude.send(REQUEST, params),
        deadline=DEADLINE_S,
    )
    request_id = next(e.data for e in events if e.type == "permission_request")["id"]
    r = await world.api.http.get(
        "/api/v1/permissions", params={"status": "pending"}, headers=world.api.auth("ana")
    )
    [request] = [item for item in r.json()["items"] if item["id"] == request_id]
    return dict(request)


async def decide(world: World, request: dict[str, Any], decision: str, note: str = "") -> None:
    body = {"decision": decision, **({"note": note} if note else {})}
    r = await world.api.http.post(
        f"/api/v1/permissions/{request['id']}/decision", json=body, headers=world.api.auth("ana")
    )
    assert r.status_code == 200, r.text


async def test_a_permission_prompt_is_asked_of_the_owner_and_her_approval_allows(
    world: World,
) -> None:
    async with channel(world) as claude:
        request = await asked(world, claude, _request("abcde"))
        decided = time.monotonic()
        await decide(world, request, "approve")
        await claude.wait_for(lambda _: bool(claude.answers()))
        print(f"allow sent {time.monotonic() - decided:.3f} s after the decision")  # a figure
    assert claude.answers() == [{"request_id": "abcde", "behavior": "allow"}]
    assert request["tool_name"] == "Bash" and request["tool_input"] == {"command": "npm test"}
    assert request["session_id"] == await world.session_id()
    # The PermissionRequest hook's prefix for the same call: one withdrawal covers both.
    prefix = relay_key_prefix(CC, world.platform_id, "Bash", {"command": "npm test"})
    assert request["relay_key"].startswith(prefix)


async def test_a_deny_answers_deny_and_the_note_follows_as_a_message(world: World) -> None:
    async with channel(world) as claude:
        request = await asked(world, claude, _request("fghij", "rm -rf build"))
        await decide(world, request, "deny", "use make clean instead")
        await claude.wait_for(lambda _: bool(claude.answers()) and bool(claude.messages()))
    assert claude.answers() == [{"request_id": "fghij", "behavior": "deny"}]
    [message] = claude.messages()
    assert "use make clean instead" in message["content"]
    assert message["meta"] == {
        "kind": "permission_denied",
        "request_id": "fghij",
        "tool_name": "Bash",
    }
    # The answer came before the note (Claude Code resolves the dialog first).
    assert [m for m, _ in claude.got] == [ANSWER, MESSAGE]


async def test_answered_in_the_terminal_first_the_hook_withdraws_it_and_nothing_is_sent(
    world: World,
) -> None:
    async with channel(world) as claude:
        request = await asked(world, claude, _request("klmno"))
        # The person said "Yes" in the terminal: the tool ran; the interactive
        # install's PostToolUse hook withdraws by the same relay key prefix.
        post = {**event(world, "PostToolUse"), "tool_name": "Bash",
                "tool_input": {"command": "npm test"}, "tool_response": {}}  # fmt: skip
        done = await run_hook(CC, post, world.env(), world.shop)
        assert done.returncode == 0, done
        r = await world.api.http.get(
            "/api/v1/permissions", params={"status": "decided"}, headers=world.api.auth("ana")
        )
        [closed] = [item for item in r.json()["items"] if item["id"] == request["id"]]
        assert closed["status"] == "cancelled", closed
        # Sync point: a later request's answer comes; none came for the withdrawn one.
        later = await asked(world, claude, _request("pqrst", "npm run lint"))
        await decide(world, later, "approve")
        await claude.wait_for(lambda _: bool(claude.answers()))
    assert claude.answers() == [{"request_id": "pqrst", "behavior": "allow"}]


async def test_malformed_and_unknown_notifications_are_ignored_with_a_log_line(
    world: World,
) -> None:
    async with channel(world) as claude:
        for params in (
            {"request_id": "abcde"},  # no tool_name
            {**_request("x" * 100)},  # an id too long
            {**_request("bad id!")},
            {**_request("vwxyz"), "tool_name": 7},
            {**_request("vwxyb"), "request_id": ["a", "list"]},
            {**_request("vwxya"), "input_preview": "p" * 5000},
        ):
            await claude.send(REQUEST, params)
        await claude.send("notifications/claude/channel/bogus", {"x": 1})
        await claude.send(MESSAGE, {"content": "a message to the server"})
        # Still serving: a good request after them is asked, and it is the only one.
        request = await asked(world, claude, _request("goodi"))
        await decide(world, request, "approve")
        await claude.wait_for(lambda _: bool(claude.answers()))
        r = await world.api.http.get("/api/v1/permissions", headers=world.api.auth("ana"))
    assert [item["id"] for item in r.json()["items"]] == [request["id"]]
    assert claude.answers() == [{"request_id": "goodi", "behavior": "allow"}]
    log = claude.log.text()
    assert log.count("ignored a malformed permission_request") == 6, log
    assert "ignored a notifications/claude/channel/bogus notification" in log


def permission_hook_input(world: World, command: str) -> dict[str, Any]:
    """Claude Code's PermissionRequest hook stdin for the same call as _request's."""
    return {**event(world, "PermissionRequest"), "tool_name": "Bash",
            "tool_input": {"command": command}, "permission_suggestions": []}  # fmt: skip


async def run_deferring_hook(
    world: World, payload: dict[str, Any], then: Callable[[Process], Awaitable[None]]
) -> HookRun:
    """Start the PermissionRequest hook; once it says it left the dialog to the
    channel, run ``then`` (given the hook's process); the finished hook."""
    env = {**world.env(), "AGENTMAIL_HOOK_TIMEOUT": "20"}
    command = [sys.executable, "-m", "mailui4agents.cli.main", "hook", CC]
    with anyio.fail_after(DEADLINE_S):
        async with await anyio.open_process(command, env=env, cwd=world.shop) as proc:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            await proc.stdin.send(json.dumps(payload).encode())
            await proc.stdin.aclose()
            err = b""
            async for chunk in proc.stderr:
                err += chunk
                if b"channel asks about this dialog" in err:
                    break
            await then(proc)
            out = b"".join([chunk async for chunk in proc.stdout])
            err += b"".join([chunk async for chunk in proc.stderr])
            code = await proc.wait()
    return HookRun(code, out.decode(), err.decode())


async def test_with_the_permission_hook_also_installed_one_dialog_opens_one_request(
    world: World,
) -> None:
    async with channel(world) as claude:
        request = await asked(world, claude, _request("abcde"))

        async def approve(_hook: Process) -> None:
            await decide(world, request, "approve")

        # Claude Code starts the interactive install's PermissionRequest hook for
        # the same dialog just after notifying the channel.
        hook = await run_deferring_hook(world, permission_hook_input(world, "npm test"), approve)
        await claude.wait_for(lambda _: bool(claude.answers()))
        r = await world.api.http.get("/api/v1/permissions", headers=world.api.auth("ana"))
    assert [item["id"] for item in r.json()["items"]] == [request["id"]]
    assert (hook.returncode, hook.stdout) == (0, "")  # the dialog takes the channel's answer
    assert claude.answers() == [{"request_id": "abcde", "behavior": "allow"}]


async def test_no_in_the_terminal_stops_the_deferring_hook_which_withdraws_the_request(
    world: World,
) -> None:
    async with channel(world) as claude:
        request = await asked(world, claude, _request("abcde"))

        async def terminal_says_no(hook: Process) -> None:
            hook.send_signal(signal.SIGTERM)  # as Claude Code does when "No" aborts the turn

        hook = await run_deferring_hook(
            world, permission_hook_input(world, "npm test"), terminal_says_no
        )
        r = await world.api.http.get(
            "/api/v1/permissions", params={"status": "decided"}, headers=world.api.auth("ana")
        )
        [closed] = [item for item in r.json()["items"] if item["id"] == request["id"]]
        # Sync point: a later request's answer comes; none came for the withdrawn one.
        later = await asked(world, claude, _request("pqrst", "npm run lint"))
        await decide(world, later, "approve")
        await claude.wait_for(lambda _: bool(claude.answers()))
    assert closed["status"] == "cancelled" and closed["decided_via"]["channel"] == "terminal"
    assert (hook.returncode, hook.stdout) == (0, "")
    assert claude.answers() == [{"request_id": "pqrst", "behavior": "allow"}]
