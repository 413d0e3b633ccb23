"""The bridge's in-process gate (hooks/core.py ``evaluate``) runs the hook's
blocking ask in a worker thread: cancelling the caller must end that thread at
once (its sockets aborted), not leave it waiting until the hook's deadline."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import anyio
import pytest

from mailui4agents.client import lite
from mailui4agents.hooks import core
from mailui4agents.hooks import gateway as hook_gateway
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall

pytestmark = pytest.mark.anyio


async def test_cancelling_the_gate_aborts_the_waiting_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = threading.Event()
    made: list[lite.Gateway] = []
    ask, real_connect = core._ask, hook_gateway.connect

    def connect(settings: HookSettings) -> lite.Gateway:
        made.append(real_connect(settings))
        return made[-1]

    def tracked(call: ToolCall, settings: HookSettings, gw: lite.Gateway) -> HookDecision:
        try:
            return ask(call, settings, gw)
        finally:
            finished.set()

    monkeypatch.setattr(hook_gateway, "connect", connect)
    monkeypatch.setattr(core, "_ask", tracked)
    # A gateway that accepts the connection and never answers: the ask would wait
    # for the stream until its 540 s deadline.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        env = {
            "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"),
            "AGENTMAIL_URL": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "AGENTMAIL_KEY": "am_agent_x", "AGENTMAIL_SESSION_ID": "s1",
        }  # fmt: skip
        call = ToolCall("Bash", {"command": "npm test"}, "p1", str(tmp_path), "t1")
        settings = HookSettings.from_env("claude-code", 540.0, call, env)
        with anyio.move_on_after(0.5) as scope:
            await core.evaluate(call, settings)
        assert scope.cancelled_caught
        assert made and made[0].aborted.is_set()
        # The thread ends on the abort: before its own 10 s stream-open limit (and
        # long before the ask's 540 s deadline).
        assert await anyio.to_thread.run_sync(finished.wait, 5.0)
