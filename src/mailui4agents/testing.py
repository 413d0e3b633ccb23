"""Run a real `agentmail serve` subprocess (for tests and benchmarks)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

# Cheap password hashes for tests and benchmarks; production keeps the strong default.
FAST_HASH_ENV = {"AGENTMAIL_ARGON2_TIME_COST": "1", "AGENTMAIL_ARGON2_MEMORY_KIB": "64"}

_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")

#: A folder the test suite searches for secrets at its end (tests/log_secrets.py):
#: where it is set, each process started here runs at log level ``info`` and
#: leaves everything it printed there when it ends.
TEST_LOGS_ENV = "MAILUI4AGENTS_TEST_LOGS"


def log_level() -> str:
    """``info`` when the suite keeps the logs (every request line), else ``warning``."""
    return "info" if os.environ.get(TEST_LOGS_ENV) else "warning"


def keep_log(kind: str, pid: int, lines: list[str]) -> None:
    """Leave a finished process's output in the suite's log folder, if there is one."""
    folder = os.environ.get(TEST_LOGS_ENV)
    if not folder or not lines:
        return
    path = Path(folder) / f"{kind}-{pid}.log"
    with path.open("a", encoding="utf-8") as out:
        out.writelines(lines)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without AGENTMAIL_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env.update(extra)
    return env


@dataclass
class GatewayProcess:
    """A gateway on 127.0.0.1 with a free port, over the given data dir."""

    data_dir: Path
    env: dict[str, str]
    port: int = 0
    extra_args: list[str] = field(default_factory=list)
    #: What runs `agentmail`: this interpreter on the importable package, or an
    #: installed console script (tests/install/ runs the built wheel's).
    command: list[str] = field(
        default_factory=lambda: [sys.executable, "-m", "mailui4agents.cli.main"]
    )
    cwd: Path | None = None
    proc: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    _pump: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0, *, port: int = 0) -> None:
        """Start and wait — on its own output, not a sleep — until it listens.
        `port` 0 picks a free one; pass the old port to restart in place."""
        self.port = port
        self.proc = subprocess.Popen(
            [
                *self.command, "serve",
                "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(self.data_dir),
                "--log-level", log_level(), *self.extra_args,
            ],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        ready = threading.Event()
        proc = self.proc

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line)
                m = _LISTENING.search(line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()  # the process ended: stop waiting

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(timeout) or proc.poll() is not None or not self.port:
            proc.kill()
            self._reap()
            raise RuntimeError("gateway did not start:\n" + "".join(self.output))

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._reap()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap()

    def _reap(self) -> None:
        """Close the output pipe once the reader has seen its end."""
        if self.proc is None:
            return
        self.proc.wait(10)
        if self._pump is not None:
            self._pump.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        keep_log("gateway", self.proc.pid, self.output)
