"""The gateway's CPU per request under each event loop and HTTP parser.

Starts the real app under uvicorn once per variant (same code, same settings,
a fresh SQLite data dir each), makes `--requests` sequential requests of each
kind, and reads the server process's own CPU time (utime + stime from
/proc/PID/stat) around them: CPU per request moves far less with the other
users of a shared machine than latency does. Variants:

- asyncio + h11: uvicorn's pure-Python parser on the standard loop;
- uvloop + httptools (http_protocol.HeaderLimitsProtocol): what `agentmail serve` runs.

Usage: .venv/bin/python bench/server.py [--requests 400] [--rounds 3]
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import httpx

from calibrate import load, machine

ADMIN_PASSWORD = "bench-admin-password"
VARIANTS = (("asyncio", "h11"), ("uvloop", "httptools"))

SERVE = """
import sys, uvicorn
from pathlib import Path
from mailui4agents.app import create_app
from mailui4agents.http_protocol import with_header_limits
from mailui4agents.settings import Settings
data, port, loop, http, password = sys.argv[1:]
settings = Settings(data_dir=Path(data), admin_password=password, argon2_time_cost=1,
                    argon2_memory_kib=64)
parser = with_header_limits(settings.header_timeout_s) if http == "httptools" else http
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(port), loop=loop, http=parser,
            log_level="warning")
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def measure(loop: str, http: str, n: int) -> dict[str, float]:
    """CPU ms per request of each kind, for one variant."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SERVE, data, str(port), loop, http, ADMIN_PASSWORD
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
                deadline = time.monotonic() + 60
                while True:  # no readiness event from a bare uvicorn: poll with a deadline
                    assert proc.returncode is None and time.monotonic() < deadline, "not started"
                    try:
                        await c.get("/healthz")
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                login = {"username": "admin", "password": ADMIN_PASSWORD}
                token = (await c.post("/api/v1/auth/login", json=login)).json()["token"]
                auth = {"Authorization": f"Bearer {token}"}
                await c.post("/api/v1/admin/agents", json={"name": "agent0"}, headers=auth)
                mail = {"to": ["agent0@/srv/bench"], "subject": "s", "body": "x" * 200}
                kinds = {
                    "GET /healthz": lambda: c.get("/healthz"),
                    "GET /api/v1/auth/tokens (bare authenticated GET)": lambda: c.get(
                        "/api/v1/auth/tokens", headers=auth
                    ),
                    "POST /api/v1/mail (send)": lambda: c.post(
                        "/api/v1/mail", json=mail, headers=auth
                    ),
                    "GET /api/v1/mailbox (50 newest)": lambda: c.get(
                        "/api/v1/mailbox", params={"limit": "50"}, headers=auth
                    ),
                }
                out = {}
                for label, call in kinds.items():
                    for _ in range(20):  # warm up: first requests build route state
                        await call()
                    before = cpu_s(proc.pid)
                    for _ in range(n):
                        r = await call()
                        assert r.status_code < 300, r.text
                    out[label] = (cpu_s(proc.pid) - before) * 1000 / n
                return out
        finally:
            proc.terminate()
            await proc.wait()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(machine())
    results: dict[tuple[str, str], list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):  # variants interleaved: load changes hit both alike
        for loop, http in VARIANTS:
            results[(loop, http)].append(await measure(loop, http, args.requests))
    labels = list(results[VARIANTS[0]][0])
    print(f"gateway CPU per request, ms (median of {args.rounds} rounds of {args.requests}):")
    base, fast = VARIANTS
    for label in labels:
        a = median(r[label] for r in results[base])
        b = median(r[label] for r in results[fast])
        print(f"  {label}: {'+'.join(base)} {a:.2f} | {'+'.join(fast)} {b:.2f} | ratio {b / a:.2f}")
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
