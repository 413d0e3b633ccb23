"""Real `agentmail serve` + real `agentmail bridge` subprocesses, and the human.

The gateway is shared by a test module; each test gets its own agent (so no
mail of another test is ever caught up), its own workspace folder and its own
bridge state dir. The human acts over the HTTP API. Where the gateway offers
no event for what a test waits on (a reply has been stored, a request is
pending), it polls with a deadline; the interval is not synchronisation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from mailui4agents.testing import clean_env, keep_log

FAKE_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"
CRASHING_BRIDGE = Path(__file__).resolve().parent / "crashing_bridge.py"
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0


@dataclass
class BridgeProcess:
    """One `agentmail bridge` subprocess; waits for its "bridge ready" log line."""

    args: list[str]
    env: dict[str, str]
    #: What runs `agentmail` (the real CLI, or a script that wraps it).
    entry: tuple[str, ...] = ("-m", "mailui4agents.cli.main")
    #: The program `entry` follows (tests/install/ runs an installed `agentmail`).
    executable: str = sys.executable
    cwd: Path | None = None
    proc: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    _ready: threading.Event = field(default_factory=threading.Event)
    _pump: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> BridgeProcess:
        self._ready = threading.Event()
        self.proc = subprocess.Popen(
            [self.executable, *self.entry, "bridge", *self.args],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        proc = self.proc

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.output.append(line)
                if "bridge ready" in line:
                    self._ready.set()
            self._ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not self._ready.wait(timeout) or proc.poll() is not None:
            self.kill()
            raise RuntimeError("bridge did not start:\n" + "".join(self.output))
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self._reap()

    def stop(self) -> int:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap()
        return self.proc.returncode if self.proc is not None else 0

    def _reap(self) -> None:
        if self.proc is None:
            return
        self.proc.wait(20)
        if self._pump is not None:
            self._pump.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        keep_log("bridge", self.proc.pid, self.output)

    @property
    def log(self) -> str:
        return "".join(self.output)


@dataclass
class Agent:
    """A test's own agent, workspace, bridge state and fake-agent log."""

    name: str
    key: str
    workspace: Path
    state_dir: Path
    log_path: Path
    fake_state: Path
    url: str
    bridges: list[BridgeProcess] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(
            AGENTMAIL_URL=self.url,
            AGENTMAIL_KEY=self.key,
            FAKE_AGENT_LOG=str(self.log_path),
            FAKE_AGENT_STATE=str(self.fake_state),
            PYTHONPATH=str(REPO / "src"),
            **extra,
        )

    def bridge(
        self,
        *args: str,
        runner: str = "command",
        start_timeout: float = 30.0,
        default_roots: bool = False,
        crash_at: str | None = None,
        env: Mapping[str, str] | None = None,
        sandbox: bool = False,
        **more_env: str,
    ) -> BridgeProcess:
        """Start a bridge (the fake agent as the command, unless `args` has a `--`).

        Its workspace root is the test's own folder (`TMP/**`: the workspaces of
        tests live outside $HOME), unless `args` gives roots or `default_roots`
        leaves the bridge its default ($HOME/**). `crash_at`: the bridge freezes
        there for the test to kill it (tests/bridge/crashing_bridge.py).
        `sandbox`: the bridge's own default (--sandbox, docs/sandbox.md); off
        otherwise, so that the other tests see the unconfined path. The
        bridge's environment gets `env` (a prepared mapping: spread as keywords it
        could fill `runner` or `default_roots`) and the keywords in `more_env`."""
        base = ["--agent", self.name, "--runner", runner, "--state-dir", str(self.state_dir),
                "--retry-delay", "0.2", "--log-level", "info"]  # fmt: skip
        if not default_roots and "--workspace-root" not in args:
            base += ["--workspace-root", f"{self.workspace.parent}/**"]
        extra = list(args)
        if not sandbox:
            base.append("--no-sandbox")
        if runner == "command" and "--" not in extra:
            extra += ["--", sys.executable, str(FAKE_AGENT)]
        process = BridgeProcess([*base, *extra], self.env(**(env or {}), **more_env))
        if crash_at is not None:
            process.env.update(CRASH_AT=crash_at, CRASH_MARK=str(self.crash_mark))
            process.entry = (str(CRASHING_BRIDGE),)
        self.bridges.append(process)
        return process.start(start_timeout)

    @property
    def crash_mark(self) -> Path:
        return self.state_dir.parent / "crash-mark"

    async def wait_frozen(self, deadline: float = WAIT_S) -> str:
        """Poll for the mark a crashing bridge writes once frozen (a file: no event
        to wait on); the id of the mail it froze on."""
        with anyio.fail_after(deadline):
            while True:
                mail_id = self.crash_mark.read_text() if self.crash_mark.exists() else ""
                if mail_id:
                    self.crash_mark.unlink()
                    return mail_id
                await anyio.sleep(0.02)

    def records(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def starts(self, mail_id: str | None = None) -> list[dict[str, Any]]:
        return [
            r
            for r in self.records()
            if r["event"] == "start" and (mail_id is None or r["mail_id"] == mail_id)
        ]

    async def wait_ledger(self, text: str, deadline: float = WAIT_S) -> str:
        """Poll the bridge's ledger (a file: no event to wait on) until it holds `text`."""
        path = self.state_dir / "ledger.jsonl"
        with anyio.fail_after(deadline):
            while True:
                content = path.read_text() if path.exists() else ""
                if text in content:
                    return content
                await anyio.sleep(0.05)

    async def wait_record(self, check: Any, deadline: float = WAIT_S) -> list[dict[str, Any]]:
        """Poll the fake agent's log (a file: no event to wait on) until `check(records)`."""
        with anyio.fail_after(deadline):
            while True:
                records = self.records()
                if check(records):
                    return records
                await anyio.sleep(0.02)


@dataclass
class Human:
    """A person on the gateway (token), plus the admin token to make agents."""

    http: httpx.AsyncClient
    token: str
    admin_token: str
    name: str = "ana"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def new_agent(self, tmp: Path, url: str) -> Agent:
        name = f"ag{uuid.uuid4().hex[:8]}"
        # ana (and every other user) may set it to work anywhere, in any mode:
        # the gateway's rules are tests/api/test_tasking.py's; the bridge's own
        # workspace roots are its tests' business.
        admin = {"Authorization": f"Bearer {self.admin_token}"}
        users = (await self.http.get("/api/v1/admin/users", headers=admin)).json()["items"]
        team = {
            "name": name,
            "taskers": [u["username"] for u in users],
            "workspaces": ["/**"],
            "max_mode": {"owners": "full", "taskers": "full"},
        }
        r = await self.http.post("/api/v1/admin/agents", json=team, headers=admin)
        assert r.status_code == 201, r.text
        workspace = tmp / "work"
        workspace.mkdir(parents=True, exist_ok=True)
        return Agent(
            name, r.json()["key"], workspace, tmp / "state", tmp / "agent.log",
            tmp / "fake-state", url,
        )  # fmt: skip

    async def send(
        self,
        to: str,
        body: str,
        *,
        subject: str = "task",
        mode: str | None = None,
        parent: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"to": [to], "subject": subject, "body": body}
        if mode is not None:
            payload["permission_mode"] = mode
        if parent is not None:
            payload["parent_mail_id"] = parent
        r = await self.http.post("/api/v1/mail", json=payload, headers=self.auth)
        assert r.status_code == 201, r.text
        return dict(r.json())

    async def mails(self, session_id: str) -> list[dict[str, Any]]:
        r = await self.http.get(
            "/api/v1/mailbox",
            params={"status": "all", "session_id": session_id, "limit": 500},
            headers=self.auth,
        )
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    async def wait_mail(
        self, session_id: str, check: Any, deadline: float = WAIT_S
    ) -> list[dict[str, Any]]:
        """Poll the session's mail (no event for "a reply was stored") until `check`."""
        with anyio.fail_after(deadline):
            while True:
                mails = await self.mails(session_id)
                if check(mails):
                    return mails
                await anyio.sleep(0.05)

    async def replies_to(self, session_id: str, mail_id: str) -> list[dict[str, Any]]:
        return [m for m in await self.mails(session_id) if m.get("parent_mail_id") == mail_id]

    async def wait_reply(self, session_id: str, mail_id: str, deadline: float = WAIT_S) -> Any:
        mails = await self.wait_mail(
            session_id, lambda ms: any(m.get("parent_mail_id") == mail_id for m in ms), deadline
        )
        return next(m for m in mails if m.get("parent_mail_id") == mail_id)

    async def pending(self, session_id: str) -> list[dict[str, Any]]:
        r = await self.http.get(
            "/api/v1/permissions",
            params={"session_id": session_id, "status": "pending"},
            headers=self.auth,
        )
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    async def all_permissions(self, session_id: str) -> list[dict[str, Any]]:
        r = await self.http.get(
            "/api/v1/permissions", params={"session_id": session_id}, headers=self.auth
        )
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    async def wait_pending(self, session_id: str, deadline: float = WAIT_S) -> dict[str, Any]:
        with anyio.fail_after(deadline):
            while True:
                pending = await self.pending(session_id)
                if pending:
                    return pending[0]
                await anyio.sleep(0.05)

    async def decide(self, request_id: str, decision: str, note: str | None = None) -> None:
        body: dict[str, Any] = {"decision": decision}
        if note is not None:
            body["note"] = note
        r = await self.http.post(
            f"/api/v1/permissions/{request_id}/decision", json=body, headers=self.auth
        )
        assert r.status_code == 200, r.text


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def dead(pid: int, deadline: float = 10.0) -> bool:
    """True once `pid` is gone. A killed process dies a moment after the signal, and
    there is no event for another process's death: poll with a deadline."""
    with anyio.move_on_after(deadline):
        while True:
            if not alive(pid):
                return True
            await anyio.sleep(0.02)
    return False
