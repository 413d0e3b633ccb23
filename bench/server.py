"""The gateway's CPU per request, by kind of request, for one or more source trees.

Starts the real app under uvicorn once per variant (same settings, a fresh
SQLite data dir each), makes `--requests` sequential requests of each kind, and
reads the server process's own CPU time (utime + stime of all its threads, from
/proc/PID/stat) around them: CPU per request moves far less with the other
users of a shared machine than latency does.

A variant is a source tree (`--src DIR`, the `src` folder of a checkout, put
first on the server's PYTHONPATH; default: this checkout) on an event loop and
HTTP parser (`--loop uvloop|asyncio`, `--http httptools|h11`; default what
`agentmail serve` runs: uvloop + httptools with `http_protocol.HeaderLimitsProtocol`).
Give `--src` twice to A/B two commits: rounds interleave the variants, so load
changes hit both alike, and the ratio is B / A.

Usage: .venv/bin/python bench/server.py [--requests 300] [--rounds 3]
           [--src OLD/src --src NEW/src] [--loop asyncio --http h11]
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median

import httpx

from calibrate import cpu_s, load, machine

ADMIN_PASSWORD = "bench-admin-password"
HERE = Path(__file__).resolve().parent.parent / "src"

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


Call = Callable[[], Awaitable[httpx.Response]]


async def kinds_of(c: httpx.AsyncClient) -> dict[str, Call]:
    """Log in, make a human, an agent, a session with mails; the requests to time."""
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    token = (await c.post("/api/v1/auth/login", json=login)).json()["token"]
    admin = {"Authorization": f"Bearer {token}"}
    r = await c.post(
        "/api/v1/admin/agents", json={"name": "agent0", "workspaces": ["/**"]}, headers=admin
    )
    agent = {"Authorization": f"Bearer {r.json()['key']}"}
    first = {"to": ["agent0@/srv/bench"], "subject": "s", "body": "x" * 200}
    r = await c.post("/api/v1/mail", json=first, headers=admin)
    assert r.status_code == 201, r.text
    sent = r.json()
    mail = {**first, "parent_mail_id": sent["id"]}
    reply = {"to": ["admin@/srv/bench"], "subject": "re", "body": "y" * 200}
    reply["parent_mail_id"] = sent["id"]
    for _ in range(50):  # a thread of 100, an inbox and a mailbox of 50, before timing
        await c.post("/api/v1/mail", json=mail, headers=admin)
        r = await c.post("/api/v1/agent/mail", json=reply, headers=agent)
        assert r.status_code == 201, r.text
    asked = itertools.count()
    pending: list[str] = []

    async def ask() -> httpx.Response:
        body = {
            "session_id": sent["session_id"],
            "tool_name": "Bash",
            "tool_input": {"command": "make test"},
            "relay_key": f"bench-{next(asked)}",
        }
        r = await c.post("/api/v1/agent/permissions", json=body, headers=agent)
        pending.append(r.json()["id"])
        return r

    r = await c.post(  # a second session, in full mode: its requests are answered 409
        "/api/v1/mail",
        json={**first, "to": ["agent0@/srv/full"], "permission_mode": "full"},
        headers=admin,
    )
    assert r.status_code == 201, r.text
    full = r.json()["session_id"]

    async def in_full_mode() -> httpx.Response:
        body = {
            "session_id": full,
            "tool_name": "Bash",
            "tool_input": {"command": "make test"},
            "relay_key": f"bench-{next(asked)}",
        }
        return await c.post("/api/v1/agent/permissions", json=body, headers=agent)

    async def decide() -> httpx.Response:
        if not pending:  # the decisions phase runs after the requests phase
            await ask()
        return await c.post(
            f"/api/v1/permissions/{pending.pop()}/decision",
            json={"decision": "approve"},
            headers=admin,
        )

    return {
        "GET /healthz": lambda: c.get("/healthz"),
        "bare authenticated GET (/api/v1/auth/tokens)": lambda: c.get(
            "/api/v1/auth/tokens", headers=admin
        ),
        "send (POST /api/v1/mail)": lambda: c.post("/api/v1/mail", json=mail, headers=admin),
        "mailbox, 50 newest": lambda: c.get(
            "/api/v1/mailbox", params={"limit": "50"}, headers=admin
        ),
        "agent inbox, all, 50": lambda: c.get(
            "/api/v1/agent/inbox", params={"status": "all", "limit": "50"}, headers=agent
        ),
        "thread, 50": lambda: c.get(
            f"/api/v1/mail/{sent['id']}/thread", params={"limit": "50"}, headers=admin
        ),
        "search, 50 of the 51 mails with 're'": lambda: c.get(
            "/api/v1/search", params={"q": "re", "limit": "50"}, headers=admin
        ),
        "permission request (POST)": ask,
        "decision (POST)": decide,
        "full mode: 409 mode_allows (POST)": in_full_mode,
    }


async def measure(src: Path, loop: str, http: str, n: int) -> dict[str, float]:
    """CPU ms per request of each kind, for one variant."""
    port = free_port()
    path = os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    with tempfile.TemporaryDirectory() as data:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SERVE, data, str(port), loop, http, ADMIN_PASSWORD, env=env
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
                out = {}
                for label, call in (await kinds_of(c)).items():
                    for _ in range(20):  # warm up: first requests build route state
                        await call()
                    before = cpu_s(proc.pid)
                    for _ in range(n):
                        r = await call()
                        assert r.status_code < 300 or "409" in label, r.text
                    out[label] = (cpu_s(proc.pid) - before) * 1000 / n
                return out
        finally:
            proc.terminate()
            await proc.wait()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src", action="append", type=Path, help="a checkout's src dir (twice: A/B)")
    ap.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    ap.add_argument("--http", default="httptools", choices=["httptools", "h11"])
    args = ap.parse_args()
    srcs = [p.resolve() for p in (args.src or [HERE])]
    print(machine())
    print("variants:", ", ".join(f"{chr(65 + i)} = {p}" for i, p in enumerate(srcs)),
          f"({args.loop} + {args.http})")  # fmt: skip
    results: list[list[dict[str, float]]] = [[] for _ in srcs]
    for _ in range(args.rounds):  # variants interleaved
        for i, src in enumerate(srcs):
            results[i].append(await measure(src, args.loop, args.http, args.requests))
    print(f"gateway CPU per request, ms (median of {args.rounds} rounds of {args.requests}):")
    for label in results[0][0]:
        figures = [median(r[label] for r in rs) for rs in results]
        cells = " | ".join(f"{chr(65 + i)} {f:.2f}" for i, f in enumerate(figures))
        ratio = f" | B/A {figures[1] / figures[0]:.2f}" if len(figures) > 1 else ""
        print(f"  {label}: {cells}{ratio}")
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
