"""opencode runner (``--runner opencode``), checked against ``opencode-ai`` 1.18.33.

opencode's headless ``run`` cannot wait for a human (it rejects every "ask" at
once), so the bridge drives ``opencode serve`` over HTTP instead:

- **One server per bridge.** :meth:`OpencodeRunner.open` starts
  ``opencode serve --hostname 127.0.0.1 --port P`` (a free port, a random
  password in ``OPENCODE_SERVER_PASSWORD``) in its own process group, with the
  bridge's environment (the person's opencode config and providers) plus
  ``OPENCODE_CONFIG_CONTENT``, which adds three agents whose permissions are the
  modes. :meth:`close` stops it with SIGINT (opencode ignores SIGTERM), then
  SIGKILL.
- **One turn** is :mod:`mailui4agents.bridge.drivers.opencode`, run as the turn's
  process (so the bridge's timeout, process-group kill and parking apply): it
  creates or resumes the session in the workspace, prompts with the mode's agent
  and answers ``permission.asked`` from the gateway's decision
  (``POST /permission/{id}/reply`` ``once`` or ``reject`` + the note).
- **Modes** = the agents' permissions (the last matching rule wins):
  ``agentmail-plan``: everything denied but reading (``edit``, ``bash``, ``task``,
  ``webfetch`` … denied by opencode itself, nobody asked); ``agentmail-workspace``:
  everything asks (→ a human by mail) but reading, and ``task`` is denied (a
  sub-agent would run with its own agent's permissions); ``agentmail-full``:
  everything allowed.
- Sessions (``ses_…``) live in ``$XDG_DATA_HOME/opencode/opencode.db`` (SQLite);
  the heartbeat reads the newest from its ``session`` table, read-only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mailui4agents.bridge.drivers.protocol import DriverParser
from mailui4agents.bridge.runners.base import (
    RECENT_SESSIONS,
    BinaryRunner,
    Launch,
    StreamParser,
    TurnContext,
    platform_session,
    reject_unknown,
)
from mailui4agents.domain.modes import Enforcement, Mode

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
READ_ONLY = ("read", "glob", "grep", "list", "lsp", "todoread", "todowrite", "skill")


def agents_config() -> dict[str, Any]:
    """The three mode agents (merged into the person's own config)."""
    reading = dict.fromkeys(READ_ONLY, "allow")
    return {
        "agent": {
            "agentmail-plan": {
                "mode": "primary",
                "description": "agentmail plan mode: read only",
                "permission": {"*": "deny", **reading},
            },
            "agentmail-workspace": {
                "mode": "primary",
                "description": "agentmail workspace mode: a human approves by mail",
                "permission": {"*": "ask", **reading, "task": "deny"},
            },
            "agentmail-full": {
                "mode": "primary",
                "description": "agentmail full mode: unconfined",
                "permission": {"*": "allow"},
            },
        }
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OpencodeRunner(BinaryRunner):
    """Turns over the HTTP API of one ``opencode serve`` per bridge."""

    name = "opencode"
    version_timeout_s = 60
    platform = "opencode"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("opencode") or "opencode"
        self.model = options.pop("model", "") or None
        data = options.pop("data_dir", "") or os.environ.get("XDG_DATA_HOME") or ""
        home = Path(os.environ.get("HOME") or Path.home())
        self.data_dir = Path(data) if data else home / ".local" / "share"
        reject_unknown("opencode", options, "bin=, model=, data_dir=")
        if self.model is not None and "/" not in self.model:
            raise ValueError("--runner-arg model= for opencode is PROVIDER/MODEL")
        self._lock = threading.Lock()
        self.server: subprocess.Popen[str] | None = None
        self.url: str | None = None
        self.password = secrets.token_urlsafe(24)
        self.start_error: str | None = None
        self._output: list[str] = []

    def enforcement(self, mode: Mode) -> Enforcement:
        # opencode's own permission engine holds each tool call until our reply
        # (workspace) or denies it itself (plan); checked end to end.
        return "native"

    # -- the server -------------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self.server is not None or shutil.which(self.binary) is None:
                return
            try:
                self._start()
            except (OSError, RuntimeError) as exc:
                self.start_error = f"opencode serve did not start: {exc}"
                logger.error("%s", self.start_error)
                self._stop()

    def _start(self) -> None:
        port = free_port()
        env = dict(os.environ)
        env["OPENCODE_SERVER_PASSWORD"] = self.password
        env.setdefault("OPENCODE_DISABLE_MODELS_FETCH", "1")
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(
            _merged_config(env.get("OPENCODE_CONFIG_CONTENT"))
        )
        for name in ("AGENTMAIL_KEY", "AGENTMAIL_TOKEN"):
            env.pop(name, None)  # the model's tools run in this server: no agentmail secrets
        home = Path(env.get("HOME") or Path.home())
        env["PWD"] = str(home)
        argv = [self.binary, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
        self.server = subprocess.Popen(
            argv, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        listening = threading.Event()
        proc = self.server

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self._output = [*self._output[-40:], line.rstrip()]
                match = re.search(r"listening on (http://\S+)", line)
                if match:
                    self.url = match.group(1).rstrip("/")
                    listening.set()
                logger.debug("opencode serve: %s", line.rstrip())
            listening.set()

        threading.Thread(target=pump, daemon=True, name="opencode-serve").start()
        if not listening.wait(START_TIMEOUT_S) or self.url is None:
            tail = "\n".join(self._output[-10:])
            raise RuntimeError(f"no 'listening on' line within {START_TIMEOUT_S:g} s:\n{tail}")
        logger.info("opencode serve listening on %s (pid %d)", self.url, proc.pid)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc, self.server = self.server, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # SIGTERM does not stop opencode serve
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_TIMEOUT_S)

    # -- turns ------------------------------------------------------------------------------

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the opencode CLI ({self.binary}) was not found"
        if self.start_error is not None:
            return self.start_error
        if self.server is None:
            return "opencode serve is not running (the bridge starts it at start-up)"
        if self.server.poll() is not None:
            tail = "\n".join(self._output[-5:])
            status = self.server.returncode
            return f"opencode serve exited with status {status}; restart the bridge\n{tail}"
        return None

    def sandbox_unsupported(self) -> str | None:
        """opencode runs its tools in the bridge's long-lived ``opencode serve``,
        not in the turn's process: a turn's sandbox cannot reach them."""
        return (
            "sandbox not applied: opencode runs its tools in the bridge's own "
            "`opencode serve`, outside the turn's process"
        )

    def launch(self, ctx: TurnContext) -> Launch:
        env = dict(ctx.base_env)
        env["AGENTMAIL_OPENCODE_URL"] = self.url or ""
        env["AGENTMAIL_OPENCODE_PASSWORD"] = self.password
        env["AGENTMAIL_OPENCODE_MODEL"] = self.model or ""
        argv = [sys.executable, "-m", "mailui4agents.bridge.drivers.opencode"]
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return DriverParser()

    def describe_defaults(self) -> str:
        model = (
            f"model {self.model} (from --runner-arg model=)"
            if self.model
            else "model: opencode's own default (its opencode.json on this host)"
        )
        return f"runner opencode: {self.binary} serve, one per bridge; {model}"

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """opencode's own top-level sessions, newest first, from its SQLite store."""
        return recent_sessions(self.data_dir / "opencode" / "opencode.db")


def _merged_config(existing: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if existing:
        with contextlib.suppress(ValueError):
            loaded = json.loads(existing)
            if isinstance(loaded, dict):
                config = loaded
    agents = config.get("agent") if isinstance(config.get("agent"), dict) else {}
    assert isinstance(agents, dict)
    return {**config, "agent": {**agents, **agents_config()["agent"]}}


def recent_sessions(db: Path, limit: int = RECENT_SESSIONS) -> list[dict[str, Any]]:
    """``{platform_id, slug, title, cwd, updated_at}`` of the newest sessions in
    opencode's database (read-only; a missing or locked database gives none)."""
    if not db.is_file():
        return []
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)) as c:
            rows = c.execute(
                "SELECT id, directory, title, time_updated FROM session "
                "WHERE parent_id IS NULL AND time_archived IS NULL "
                "ORDER BY time_updated DESC LIMIT ?",
                (limit,),
            ).fetchall()
    except sqlite3.Error as exc:
        logger.debug("cannot read opencode sessions from %s: %s", db, exc)
        return []
    found = []
    for sid, directory, title, updated in rows:
        when = datetime.fromtimestamp(int(updated) / 1000, UTC)
        found.append(
            platform_session(
                str(sid),
                str(title or ""),
                str(directory),
                when,
                default_title=str(sid),
                default_slug=f"opencode-{str(sid)[4:12]}",
            )
        )
    return found
