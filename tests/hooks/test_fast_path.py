"""The hook's fast path: a read-only call is decided on the standard library alone
(mailui4agents/cli/entry.py, mailui4agents/hooks/core.py), and every failure on
that path still blocks (exit 2), never exits 1 ("proceed" to Claude Code).

Which modules a real hook process loaded is read from `python -X importtime`
(every import it made, in its own process); timings are in bench/, not here.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mailui4agents.cli import fast_hook as entry
from mailui4agents.hooks import PLATFORMS
from mailui4agents.hooks import runner as hook_runner
from mailui4agents.testing import clean_env
from tests.hooks.harness import claude_input

# Never on the path of a call decided without the gateway.
HEAVY = {
    "click", "anyio", "asyncio", "httpx", "pydantic", "dataclasses", "pathlib",
    "mailui4agents.client.config", "mailui4agents.hooks.gateway", "ssl",
}  # fmt: skip

ENTRY = "import sys; from mailui4agents.cli.entry import main; sys.argv[1:] = {args!r}; main()"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_traced(
    argv_tail: list[str], payload: dict[str, Any], env: dict[str, str], *, via_m: bool
) -> tuple[subprocess.CompletedProcess[bytes], set[str]]:
    """A real hook process with -X importtime: its result and every module it imported."""
    if via_m:  # the bridge's hook command
        argv = [sys.executable, "-X", "importtime", "-m", "mailui4agents.cli.main", *argv_tail]
    else:  # the console script's entry point
        argv = [sys.executable, "-X", "importtime", "-c", ENTRY.format(args=argv_tail)]
    done = subprocess.run(
        argv, input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60
    )
    modules = set()
    for line in done.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip())
    return done, modules


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    return clean_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)


def test_the_fast_path_names_every_platform() -> None:
    assert set(PLATFORMS) == entry.HOOK_PLATFORMS


@pytest.mark.parametrize("via_m", [False, True], ids=["console-script", "python-m"])
def test_a_read_only_call_is_decided_without_heavy_imports(tmp_path: Path, via_m: bool) -> None:
    env = _env(tmp_path, AGENTMAIL_KEY="am_agent_x", AGENTMAIL_SESSION_ID="s1")
    payload = claude_input("Read", {"file_path": "/srv/shop/a.py"})
    done, modules = run_traced(["hook", "claude-code"], payload, env, via_m=via_m)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow"
    assert "mailui4agents.hooks.core" in modules  # the trace does see our imports
    assert modules & HEAVY == set()


def test_a_protected_path_is_refused_on_the_fast_path(tmp_path: Path) -> None:
    env = _env(tmp_path)
    payload = claude_input("Bash", {"command": "cat >> ~/.ssh/authorized_keys"})
    done, modules = run_traced(["hook", "claude-code"], payload, env, via_m=False)
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "protected" in out["permissionDecisionReason"]
    assert modules & HEAVY == set()


# Never on the path of a call that asks a human either (hooks/gateway.py): the
# ask runs on the standard library's sockets (client/lite.py).
ASK_HEAVY = {
    "anyio", "asyncio", "httpx", "httpcore", "pydantic", "ssl", "click",
    "mailui4agents.client.client", "mailui4agents.client.waiting", "mailui4agents.wire.models",
}  # fmt: skip


def test_a_guarded_call_asks_on_the_standard_library_and_still_fails_closed(
    tmp_path: Path,
) -> None:
    """Negative control for the import check: a call that must ask a human loads
    the gateway code — but no event loop, httpx or pydantic; with the gateway
    down, a mail-driven call is denied."""
    env = _env(
        tmp_path,
        AGENTMAIL_URL=f"http://127.0.0.1:{_closed_port()}",
        AGENTMAIL_KEY="am_agent_x",
        AGENTMAIL_SESSION_ID="s1",
        AGENTMAIL_HOOK_TIMEOUT="5",
    )
    done, modules = run_traced(["hook", "claude-code"], claude_input(), env, via_m=False)
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert done.returncode == 0
    assert out["permissionDecision"] == "deny" and "unavailable" in out["permissionDecisionReason"]
    assert {"mailui4agents.hooks.gateway", "mailui4agents.client.lite"} <= modules
    assert modules & ASK_HEAVY == set()


def test_a_broken_config_file_still_denies_on_the_fast_path(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = tmp_path / "home" / ".config" / "agentmail" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text("{not json")
    done, _ = run_traced(["hook", "claude-code"], claude_input("Read", {}), env, via_m=False)
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "could not load its settings" in out["permissionDecisionReason"]


def test_help_and_other_commands_still_go_through_click(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", ENTRY.format(args=["hook", "claude-code", "--help"])]
    done = subprocess.run(argv, env=_env(tmp_path), capture_output=True, timeout=60)
    assert done.returncode == 0 and b"Claude Code PreToolUse hook" in done.stdout


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """os._exit raises instead, so the in-process checks below can read the code."""

    def fake_exit(code: int) -> None:
        raise _Exit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("exits")
def test_a_broken_install_blocks_with_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mailui4agents.hooks.runner", None)  # import fails
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with pytest.raises(_Exit) as exited:
        entry.hook_fast_path(["hook", "claude-code"])
    assert exited.value.code == 2
    assert "blocking" in stderr.getvalue()


@pytest.mark.usefixtures("exits")
def test_output_that_cannot_be_printed_blocks_with_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(io.StringIO):
        def write(self, _text: str) -> int:
            raise OSError("stdout closed")

    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(claude_input("Read", {})).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", Broken())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with pytest.raises(_Exit) as exited:
        hook_runner.run_and_exit("claude-code")
    assert exited.value.code == 2


@pytest.mark.usefixtures("exits")
def test_other_arguments_fall_through_to_click() -> None:
    # Negative control: nothing but exactly `hook <platform>` takes the fast path.
    for args in (["hook"], ["hook", "claude-code", "--help"], ["hook", "nope"], ["inbox"]):
        entry.hook_fast_path(args)  # returns, does not exit
