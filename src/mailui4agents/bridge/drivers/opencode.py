"""One opencode turn against the bridge's ``opencode serve`` (docs/platforms.md, "opencode").

Started by :class:`mailui4agents.bridge.runners.opencode.OpencodeRunner` as the
turn's process (prompt on stdin, cwd = the workspace). It:

1. opens the server's event stream (``GET /event``) first, so nothing is missed;
2. resumes ``AGENTMAIL_PLATFORM_SESSION_ID`` (it must exist) or creates a session
   (``POST /session``), all in the workspace (header ``x-opencode-directory``);
3. sends the prompt (``POST /session/{id}/prompt_async``) with the mode's agent
   (``agentmail-plan|workspace|full``, whose permissions the runner configured);
4. answers each ``permission.asked`` of the session (or a sub-session) with the
   hook flow's decision: ``POST /permission/{id}/reply`` ``once``, or ``reject``
   with the reason (the human's note) as ``message``, which opencode hands to the
   model. "always" is never sent: a standing grant is the gateway's business;
5. on ``session.idle`` reads the session's last assistant message: its text is
   the answer, its ``error`` (a 401 from the model, say) fails the turn.

SIGTERM (turn timeout, bridge shutdown) aborts the session before exiting.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from typing import Any
from urllib.parse import quote

import anyio
import httpx
from anyio.abc import TaskGroup

from mailui4agents.bridge.drivers.gate import decide
from mailui4agents.bridge.drivers.protocol import emit

logger = logging.getLogger(__name__)

PLATFORM = "opencode"
CONNECT_TIMEOUT_S = 30.0


class TurnFailed(Exception):
    pass


class Turn:
    def __init__(self, client: httpx.AsyncClient, directory: str) -> None:
        self.client = client
        self.directory = directory
        self.session_id = ""
        self.ours: set[str] = set()
        self.busy = False
        self.idle = anyio.Event()
        self.connected = anyio.Event()
        self.error: str | None = None
        self.pending: set[str] = set()
        self.tasks: TaskGroup | None = None

    async def events(self) -> None:
        async with self.client.stream("GET", "/event", timeout=None) as response:
            if response.status_code != 200:
                raise TurnFailed(
                    f"opencode serve refused the event stream ({response.status_code})"
                )
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                try:
                    event = json.loads(line[5:].strip())
                except ValueError:
                    continue
                if isinstance(event, dict):
                    await self.on_event(event)

    async def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        props = event.get("properties") if isinstance(event.get("properties"), dict) else {}
        assert isinstance(props, dict)
        if kind == "server.connected":
            self.connected.set()
            return
        sid = props.get("sessionID")
        if kind in ("session.created", "session.updated"):
            info = props.get("info") if isinstance(props.get("info"), dict) else {}
            assert isinstance(info, dict)
            if info.get("parentID") in self.ours and isinstance(info.get("id"), str):
                self.ours.add(info["id"])  # a sub-agent's session: its asks are ours too
            return
        if sid not in self.ours:
            return
        if kind == "permission.asked":
            self.pending.add(str(props.get("id")))
            assert self.tasks is not None
            self.tasks.start_soon(self.answer, props)
        elif kind == "session.status" and sid == self.session_id:
            status = props.get("status")
            if isinstance(status, dict) and status.get("type") == "busy":
                self.busy = True
        elif kind == "session.idle" and sid == self.session_id and self.busy:
            self.idle.set()
        elif kind == "session.error" and sid == self.session_id:
            self.error = describe_error(props.get("error"))

    async def answer(self, props: dict[str, Any]) -> None:
        request_id = str(props.get("id"))
        tool = props.get("tool") if isinstance(props.get("tool"), dict) else {}
        assert isinstance(tool, dict)
        metadata = props.get("metadata") if isinstance(props.get("metadata"), dict) else {}
        assert isinstance(metadata, dict)
        tool_input = {**metadata, "patterns": props.get("patterns") or []}
        decision = await decide(
            PLATFORM, str(props.get("permission") or "unknown"), tool_input,
            session_id=str(props.get("sessionID") or self.session_id), cwd=self.directory,
            tool_use_id=str(tool.get("callID") or request_id),
        )  # fmt: skip
        body: dict[str, Any] = {"reply": "once" if decision.verdict == "allow" else "reject"}
        if decision.verdict != "allow":
            body["message"] = decision.reason
            emit("denied", tool=props.get("permission"), reason=decision.reason)
        response = await self.client.post(f"/permission/{quote(request_id)}/reply", json=body)
        self.pending.discard(request_id)
        if response.status_code >= 400:
            logger.warning("opencode refused the permission reply: %s", response.text[:300])

    async def run(self, prompt: str, resume: str | None, agent: str, model: Any) -> None:
        async with anyio.create_task_group() as tasks:
            self.tasks = tasks
            tasks.start_soon(self.events)
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                await self.connected.wait()
            if resume:
                found = await self.client.get(f"/session/{quote(resume)}")
                if found.status_code != 200:
                    raise TurnFailed(f"resume failed: opencode has no session {resume}")
                self.session_id = resume
            else:
                created = await self.client.post("/session", json={})
                if created.status_code != 200:
                    raise TurnFailed(f"opencode could not create a session: {created.text[:300]}")
                self.session_id = str(created.json()["id"])
            self.ours.add(self.session_id)
            emit("session", id=self.session_id)
            body: dict[str, Any] = {"parts": [{"type": "text", "text": prompt}], "agent": agent}
            if model is not None:
                body["model"] = model
            sent = await self.client.post(f"/session/{self.session_id}/prompt_async", json=body)
            if sent.status_code >= 400:
                raise TurnFailed(f"opencode refused the prompt ({sent.status_code}): {sent.text}")
            await self.idle.wait()
            tasks.cancel_scope.cancel()
        await self.report()

    async def report(self) -> None:
        messages = await self.client.get(f"/session/{self.session_id}/message")
        items = messages.json() if messages.status_code == 200 else []
        last = next(
            (m for m in reversed(items) if isinstance(m, dict)
             and (m.get("info") or {}).get("role") == "assistant"),
            None,
        )  # fmt: skip
        if last is None:
            raise TurnFailed(self.error or "opencode gave no answer")
        error = last["info"].get("error")
        if error:
            raise TurnFailed(describe_error(error))
        if self.error:
            raise TurnFailed(self.error)
        text = "".join(
            str(p.get("text") or "")
            for p in last.get("parts") or []
            if isinstance(p, dict) and p.get("type") == "text" and not p.get("synthetic")
        )
        emit("text", text=text)

    async def abort(self) -> None:
        if self.session_id:
            with anyio.move_on_after(3):
                await self.client.post(f"/session/{self.session_id}/abort")


def describe_error(error: Any) -> str:
    """opencode's error object (``{name, data: {message, statusCode, ...}}``) in words."""
    if not isinstance(error, dict):
        return str(error or "opencode reported an error")
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    assert isinstance(data, dict)
    status = data.get("statusCode")
    message = str(data.get("message") or error.get("name") or "error")
    body = data.get("responseBody")
    parts = [f"{error.get('name') or 'error'}", f"HTTP {status}" if status else "", message]
    if isinstance(body, str) and body and body not in message:
        parts.append(body[:500])
    return ": ".join(p for p in parts if p)


def unwrap(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one member."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def main() -> int:
    url = os.environ["AGENTMAIL_OPENCODE_URL"]
    password = os.environ.get("AGENTMAIL_OPENCODE_PASSWORD", "")
    directory = os.getcwd()
    mode = os.environ.get("AGENTMAIL_PERMISSION_MODE", "workspace")
    agent = f"agentmail-{mode if mode in ('plan', 'workspace', 'full') else 'workspace'}"
    model_arg = os.environ.get("AGENTMAIL_OPENCODE_MODEL", "")
    model = None
    if "/" in model_arg:
        provider, model_id = model_arg.split("/", 1)
        model = {"providerID": provider, "modelID": model_id}
    resume = os.environ.get("AGENTMAIL_PLATFORM_SESSION_ID") or None
    prompt = sys.stdin.read()
    headers = {"x-opencode-directory": quote(directory, safe="")}
    auth = ("opencode", password) if password else None
    status = 0
    async with httpx.AsyncClient(base_url=url, headers=headers, auth=auth, timeout=60) as client:
        turn = Turn(client, directory)
        async with anyio.create_task_group() as outer:

            async def stop_on_signal() -> None:
                nonlocal status
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        with anyio.CancelScope(shield=True):
                            await turn.abort()
                        emit("error", message="the turn was stopped (timeout or bridge shutdown)")
                        status = 143
                        outer.cancel_scope.cancel()
                        return

            outer.start_soon(stop_on_signal)
            try:
                await turn.run(prompt, resume, agent, model)
            except Exception as exc:
                inner = unwrap(exc)
                if isinstance(inner, TurnFailed):
                    emit("error", message=str(inner))
                elif isinstance(inner, httpx.HTTPError | TimeoutError):
                    emit("error", message=f"cannot talk to opencode serve at {url}: {inner!r}")
                else:
                    raise
                status = 1
            outer.cancel_scope.cancel()
    return status


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(anyio.run(main))
