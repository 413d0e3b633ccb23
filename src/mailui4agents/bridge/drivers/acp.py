"""One turn of any Agent Client Protocol agent over stdio (docs/platforms.md, "ACP").

Run by :class:`mailui4agents.bridge.runners.acp.AcpRunner` as the turn's process:
``python -m mailui4agents.bridge.drivers.acp CMD ARGS...`` (prompt on stdin, cwd =
the workspace). It starts the agent ``CMD ARGS...`` as its child (same process
group: the bridge's timeout kill reaches it) and speaks JSON-RPC 2.0, one message
a line, on the child's stdin/stdout:

1. ``initialize`` (protocol version 1; no file-system or terminal capabilities
   offered, so the agent uses its own tools, which it must ask about);
2. ``session/load`` of ``AGENTMAIL_PLATFORM_SESSION_ID`` when the agent says it
   can load sessions (a history it replays is not taken as the answer), else
   ``session/new``; with mode ``plan`` and an agent mode called ``plan``,
   ``session/set_mode`` to it;
3. ``session/prompt``; ``session/update`` chunks of the agent's text are the answer;
4. every ``session/request_permission`` is answered from the hook flow's
   decision (fail closed): an ``allow_once`` option, else a ``reject_once``
   option (or ``cancelled`` when there is none). ACP's answer carries no
   message, so when a human denied with a note, a second ``session/prompt``
   tells the model the note, and that answer is the turn's answer.

Written against the protocol directly (it is a handful of JSON-RPC messages),
not the ``agent-client-protocol`` package: no new runtime dependency for it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from mailui4agents.bridge.drivers.gate import decide
from mailui4agents.bridge.drivers.protocol import emit
from mailui4agents.hooks.types import deny

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
INIT_TIMEOUT_S = 120.0
MAX_LINE = 16 * 1024 * 1024


class TurnFailed(Exception):
    pass


class Agent:
    """The JSON-RPC connection to the agent process."""

    def __init__(self, process: Process, platform: str, cwd: str) -> None:
        self.process = process
        self.platform = platform
        self.cwd = cwd
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self.collecting = False
        self.text: list[str] = []
        self.session_id = ""
        self.denials: list[tuple[str, str, str | None]] = []  # tool, reason, note
        self.tasks: Any = None
        #: While the model is told a human's note: refuse further asks without asking
        #: (the human just said no; a second request nobody expects would hang the turn).
        self.refuse_all = False

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        data = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False) + "\n"
        await self.process.stdin.send(data.encode("utf-8"))

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self.ids)
        done: tuple[anyio.Event, list[Any]] = (anyio.Event(), [])
        self.waiting[request_id] = done
        await self.send({"id": request_id, "method": method, "params": params})
        await done[0].wait()
        reply = done[1][0]
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            detail = error.get("data")
            text = str(error.get("message") or "error")
            if detail:
                text += f": {json.dumps(detail, ensure_ascii=False)[:1000]}"
            raise TurnFailed(f"the agent answered {method} with an error: {text}")
        return reply.get("result")

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for line in lines(self.process.stdout):
            try:
                message = json.loads(line)
            except ValueError:
                logger.debug("agent said (not JSON): %s", line[:200])
                continue
            if isinstance(message, dict):
                await self.on_message(message)
        for event, box in self.waiting.values():  # the agent is gone: fail every call
            box.append({"error": {"message": "the agent exited"}})
            event.set()

    async def on_message(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            waiting = self.waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
            if waiting is not None:
                waiting[1].append(message)
                waiting[0].set()
            return
        method = message["method"]
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if method == "session/update":
            self.on_update(params)
        elif method == "session/request_permission" and "id" in message:
            self.tasks.start_soon(self.permission, message["id"], params)
        elif "id" in message:  # a request we do not serve (no fs/terminal offered)
            error = {"code": -32601, "message": f"{method} not supported"}
            await self.send({"id": message["id"], "error": error})

    def on_update(self, params: dict[str, Any]) -> None:
        update = params.get("update") if isinstance(params.get("update"), dict) else {}
        assert isinstance(update, dict)
        if not self.collecting or update.get("sessionUpdate") != "agent_message_chunk":
            return
        content = update.get("content")
        if isinstance(content, dict) and content.get("type") == "text":
            self.text.append(str(content.get("text") or ""))

    async def permission(self, request_id: Any, params: dict[str, Any]) -> None:
        tool = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        assert isinstance(tool, dict)
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        raw = tool.get("rawInput")
        tool_input: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
        if tool.get("title"):
            tool_input.setdefault("title", tool["title"])
        name = str(tool.get("kind") or tool.get("title") or "tool")
        if not tool_input and not tool.get("kind"):
            # DSH sends only the call's id: show the person what the agent said
            # before asking, and say plainly that nothing else is known.
            said = "".join(self.text).strip()
            tool_input = {
                "details": f"{self.platform} gave no details of this tool call (only its id)",
                "agent_said_before_asking": said[-NO_DETAILS_SAID:] if said else "(nothing)",
            }
        if self.refuse_all:
            decision = deny("not asked again: a human has just denied a tool call in this turn")
        else:
            decision = await decide(
                self.platform, name, tool_input, session_id=self.session_id or None,
                cwd=self.cwd, tool_use_id=str(tool.get("toolCallId") or "") or None,
            )  # fmt: skip
        wanted = (
            ("allow_once",) if decision.verdict == "allow" else ("reject_once", "reject_always")
        )
        chosen = next((o for o in options if o.get("kind") in wanted), None)
        if decision.verdict != "allow":
            emit("denied", tool=name, reason=decision.reason)
            if not self.refuse_all:
                self.denials.append((name, decision.reason, decision.note))
        if chosen is None:
            outcome: dict[str, Any] = {"outcome": "cancelled"}
        else:
            outcome = {"outcome": "selected", "optionId": chosen.get("optionId")}
        await self.send({"id": request_id, "result": {"outcome": outcome}})


#: How much of the agent's text a request without tool details shows (its end).
NO_DETAILS_SAID = 1500


async def lines(stream: ByteReceiveStream) -> Any:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode("utf-8", "replace")
        if len(buffer) > MAX_LINE:
            buffer = b""
    if buffer.strip():
        yield buffer.decode("utf-8", "replace")


async def turn(agent: Agent, prompt: str, resume: str | None, mode: str) -> str:
    init = await agent.call(
        "initialize",
        {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                   "terminal": False},
            "clientInfo": {"name": "agentmail-bridge", "version": "1"},
        },
    )  # fmt: skip
    capabilities = (init or {}).get("agentCapabilities") or {}
    if resume:
        if not capabilities.get("loadSession"):
            raise TurnFailed("resume failed: this ACP agent cannot load sessions (loadSession)")
        session = await agent.call(
            "session/load", {"sessionId": resume, "cwd": agent.cwd, "mcpServers": []}
        )
        agent.session_id = resume
    else:
        session = await agent.call("session/new", {"cwd": agent.cwd, "mcpServers": []})
        agent.session_id = str((session or {}).get("sessionId") or "")
        if not agent.session_id:
            raise TurnFailed("the agent gave no sessionId for session/new")
    emit("session", id=agent.session_id)
    modes = ((session or {}).get("modes") or {}).get("availableModes") or []
    if mode == "plan" and any(isinstance(m, dict) and m.get("id") == "plan" for m in modes):
        await agent.call("session/set_mode", {"sessionId": agent.session_id, "modeId": "plan"})
    agent.collecting = True
    result = await agent.call(
        "session/prompt",
        {"sessionId": agent.session_id, "prompt": [{"type": "text", "text": prompt}]},
    )
    answer = "".join(agent.text)
    notes = [(tool, reason) for tool, reason, note in agent.denials if note]
    if notes:
        agent.text = []
        agent.refuse_all = True
        told = "\n".join(f"- {tool}: {reason}" for tool, reason in notes)
        await agent.call(
            "session/prompt",
            {"sessionId": agent.session_id, "prompt": [{"type": "text", "text":
             f"A human denied your tool call(s) and left a note:\n{told}\n"
             "Take the note into account and answer; do not retry the denied call."}]},
        )  # fmt: skip
        answer = "".join(agent.text) or answer
    stop = (result or {}).get("stopReason")
    if stop not in (None, "end_turn", "max_turn_requests", "max_tokens"):
        raise TurnFailed(f"the agent stopped the turn: {stop}; {answer}".strip())
    return answer


async def main(argv: list[str]) -> int:
    if not argv:
        emit("error", message="the acp driver needs the agent's command line")
        return 2
    prompt = sys.stdin.read()
    cwd = os.getcwd()
    resume = os.environ.get("AGENTMAIL_PLATFORM_SESSION_ID") or None
    mode = os.environ.get("AGENTMAIL_PERMISSION_MODE", "workspace")
    platform = os.environ.get("AGENTMAIL_ACP_PLATFORM", "acp")
    try:
        process = await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, cwd=cwd
        )
    except OSError as exc:
        emit("error", message=f"cannot start {argv[0]}: {exc.strerror or exc}")
        return 127
    agent = Agent(process, platform, cwd)
    status = 0
    async with anyio.create_task_group() as tasks:
        agent.tasks = tasks

        async def stop_on_signal() -> None:
            nonlocal status
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    emit("error", message="the turn was stopped (timeout or bridge shutdown)")
                    status = 143
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(stop_on_signal)
        tasks.start_soon(agent.read)
        try:
            emit("text", text=await turn(agent, prompt, resume, mode))
        except TurnFailed as exc:
            emit("error", message=str(exc))
            status = 1
        tasks.cancel_scope.cancel()
    if process.returncode is None:
        process.kill()
    with anyio.move_on_after(5):
        await process.aclose()
    return status


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(anyio.run(main, sys.argv[1:]))
