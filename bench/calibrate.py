"""Same-run calibration shared by the benchmarks (see bench/README.md).

Machines here differ by 2-4x from day to day and are shared, so a figure alone
says little. Every bench measures, in the same run, three floors and prints
each of its figures as a ratio to them:

- the raw single-row SQLite commit rate (a file in a temp dir, WAL,
  ``synchronous=FULL``, one INSERT + COMMIT per row): what one durable write
  costs on this disk, the ceiling of any one-writer-at-a-time design;
- a bare authenticated GET on the same gateway (``GET /api/v1/auth/tokens``:
  token check, one small read, JSON): what any request costs there;
- ``python -c pass`` spawn to exit: the floor of any hook process.

Each also carries the load average and CPU time where it helps: wall-clock
figures move with the other users of the machine, CPU time much less.
"""

from __future__ import annotations

import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from stats import pct


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (utime + stime of all its threads, /proc/PID/stat), s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bytecode() -> None:
    """Compile the package's sources, as an installed wheel has them compiled:
    with PYTHONDONTWRITEBYTECODE set, an editable install's hook would otherwise
    compile every module it imports on each spawn (~20 ms more per hook)."""
    import compileall

    import mailui4agents

    compileall.compile_dir(Path(mailui4agents.__file__).parent, quiet=1)


def machine() -> str:
    """Cores, load average, Python and SQLite versions: one line for every report."""
    return (
        f"machine: {platform.platform()} cpus={os.cpu_count()} "
        f"python={sys.version.split()[0]} sqlite={sqlite3.sqlite_version} loadavg={load()}"
    )


def sqlite_commit_rate(rows: int = 400) -> float:
    """Durable single-row commits per second (WAL, synchronous=FULL)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "calibrate.db", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            started = time.perf_counter()
            for i in range(rows):
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO t (body) VALUES (?)", (f"row {i} " + "x" * 200,))
                db.execute("COMMIT")
            return rows / (time.perf_counter() - started)
        finally:
            db.close()


@dataclass(frozen=True)
class Spawn:
    wall_ms: list[float]
    cpu_ms: list[float]  # user + system CPU time of the child


def spawn(
    argv: list[str], runs: int, stdin: bytes = b"", env: dict[str, str] | None = None
) -> Spawn:
    """Spawn → exit of `argv`, `runs` times: wall and CPU milliseconds each."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, input=stdin, env=env, check=True, capture_output=True)
        wall.append((time.perf_counter() - started) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return Spawn(wall, cpu)


def python_pass(runs: int = 30) -> Spawn:
    return spawn([sys.executable, "-c", "pass"], runs)


async def bare_get_ms(http: httpx.AsyncClient, token: str, runs: int = 200) -> list[float]:
    """Latency of a bare authenticated GET on the gateway (sequential)."""
    headers = {"Authorization": f"Bearer {token}"}
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        r = await http.get("/api/v1/auth/tokens", headers=headers)
        out.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 200, r.text
    return out


@dataclass
class Calibration:
    commit_rate: float  # commits/s
    get_p50_ms: float
    pass_p50_ms: float
    pass_cpu_p50_ms: float

    def lines(self) -> list[str]:
        return [
            f"calibration: raw SQLite commit rate (WAL, synchronous=FULL) "
            f"{self.commit_rate:.0f} commits/s ({1000 / self.commit_rate:.2f} ms each)",
            f"calibration: bare authenticated GET p50 {self.get_p50_ms:.2f} ms",
            f"calibration: `python -c pass` p50 {self.pass_p50_ms:.1f} ms wall, "
            f"{self.pass_cpu_p50_ms:.1f} ms CPU",
        ]

    def rate(self, per_s: float) -> str:
        return f"{per_s / self.commit_rate:.3f} x raw commit rate"

    def vs_get(self, ms: float) -> str:
        return f"{ms / self.get_p50_ms:.2f} x bare GET"

    def vs_pass(self, ms: float) -> str:
        return f"{ms / self.pass_p50_ms:.2f} x python -c pass"


async def calibrate(http: httpx.AsyncClient | None, token: str | None) -> Calibration:
    """All three floors; the GET one only when a gateway and token are given."""
    rate = sqlite_commit_rate()
    get = await bare_get_ms(http, token) if http is not None and token is not None else [0.0]
    floor = python_pass()
    return Calibration(rate, pct(get, 50), pct(floor.wall_ms, 50), pct(floor.cpu_ms, 50))
