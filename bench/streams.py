"""Many live SSE streams on one gateway process: memory per stream and delivery
latency while they are held.

`--streams` streams (default 5,000) of `--agents` agents are opened by
`--procs` child processes over plain sockets (the cheapest reader) and drained
until the end. The gateway's RSS is read from /proc before and after. Then,
while they are held, one more stream (this process, httpx) measures send →
`new_mail` latency for mails to its agent, which also has its share of the
held streams; every send wakes only the streams of its recipient
(events/hub.py), and each held stream of that agent receives the mail too.

Usage: .venv/bin/python bench/streams.py [--streams 5000] [--agents 500]
       [--procs 4] [--deliveries 200]
Raises RLIMIT_NOFILE for itself, its children and the gateway.
Prints its figures with the same-run calibration (bench/calibrate.py); it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import httpx

from calibrate import calibrate, load, machine
from mailui4agents.client.sse import SSEParser
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"


def raise_file_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def hold(url: str, keys: list[str]) -> None:
    """`--hold` mode (a child process): one stream per key, "ready", then drain."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    opening = asyncio.Semaphore(50)  # within the listen backlog
    opened = 0
    all_open = asyncio.Event()

    async def one(key: str) -> None:
        nonlocal opened
        request = (
            f"GET /api/v1/agent/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
        async with opening:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            status = await reader.readline()
            assert b" 200 " in status, status
        opened += 1
        if opened == len(keys):
            all_open.set()
        while await reader.read(65536):
            pass

    tasks = [asyncio.create_task(one(k)) for k in keys]
    await all_open.wait()
    print("ready", flush=True)
    await asyncio.gather(*tasks)


async def setup(http: httpx.AsyncClient, agents: int) -> tuple[str, list[str]]:
    r = await http.post(
        "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    admin = {"Authorization": f"Bearer {r.json()['token']}"}
    body = {"username": "ana", "password": "bench-password"}
    await http.post("/api/v1/admin/users", json=body, headers=admin)
    r = await http.post("/api/v1/auth/login", json=body)
    keys = []
    for i in range(agents):
        a = await http.post(
            "/api/v1/admin/agents",
            json={"name": f"agent{i}", "workspaces": ["/**"], "taskers": ["ana"]},
            headers=admin,
        )
        keys.append(a.json()["key"])
    return r.json()["token"], keys


async def deliveries(url: str, ana: str, key: str, n: int) -> list[float]:
    got: dict[str, float] = {}
    arrived = asyncio.Event()
    opened = asyncio.Event()

    async def listen() -> None:
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as c,
            c.stream("GET", "/api/v1/agent/events", headers=headers) as r,
        ):
            opened.set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event == "new_mail":
                        got[json.loads(ev.data)["mail_id"]] = time.perf_counter()
                        arrived.set()

    task = asyncio.create_task(listen())
    await asyncio.wait_for(opened.wait(), 120)
    out = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        headers = {"Authorization": f"Bearer {ana}"}
        first = await http.post(
            "/api/v1/mail", json={"to": ["agent0@/srv/s.new"], "subject": "s", "body": "b"},
            headers=headers,
        )  # fmt: skip
        parent = first.json()["id"]
        for i in range(n):
            t0 = time.perf_counter()
            r = await http.post(
                "/api/v1/mail",
                json={"to": ["agent0@/srv/s"], "subject": f"d{i}", "body": "x" * 200,
                      "parent_mail_id": parent},
                headers=headers,
            )  # fmt: skip
            assert r.status_code == 201, r.text
            mail_id = r.json()["id"]
            while mail_id not in got:
                arrived.clear()
                await asyncio.wait_for(arrived.wait(), 60)
            out.append((got[mail_id] - t0) * 1000)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
        gw = GatewayProcess(data_dir=Path(tmp) / "data", env=env)
        gw.start(timeout=180)
        assert gw.proc is not None
        children: list[asyncio.subprocess.Process] = []
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=120) as http:
                ana, keys = await setup(http, args.agents)
                cal = await calibrate(http, ana)
            base = rss_mb(gw.proc.pid)
            held = [keys[i % len(keys)] for i in range(args.streams)]
            per = -(-len(held) // args.procs)
            started = time.perf_counter()
            for p in range(args.procs):
                part = held[p * per : (p + 1) * per]
                if not part:
                    continue
                child = await asyncio.create_subprocess_exec(
                    sys.executable, __file__, "--hold", gw.url, json.dumps(part),
                    stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                children.append(child)
            for child in children:
                assert child.stdout is not None
                line = await asyncio.wait_for(child.stdout.readline(), 600)
                assert line.strip() == b"ready", line
            open_s = time.perf_counter() - started
            full = rss_mb(gw.proc.pid)
            lat = await deliveries(gw.url, ana, keys[0], args.deliveries)
            after = rss_mb(gw.proc.pid)
        finally:
            for child in children:
                child.terminate()
                await child.wait()
            gw.stop()
    print(*cal.lines(), sep="\n")
    print(f"{args.streams} streams of {args.agents} agents held by {args.procs} processes, "
          f"opened in {open_s:.1f} s")  # fmt: skip
    print(f"gateway RSS: {base:.0f} MB before, {full:.0f} MB with the streams open, "
          f"{after:.0f} MB after the deliveries; "
          f"{(full - base) * 1024 / args.streams:.1f} KB per stream")  # fmt: skip
    print(
        summary(f"send->SSE delivery latency while {args.streams} streams are held", lat),
        "|", cal.vs_get(pct(lat, 50)), "(p50)",
    )  # fmt: skip
    print(f"loadavg at the end: {load()}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--hold":
        raise_file_limit(len(json.loads(sys.argv[3])) + 100)
        asyncio.run(hold(sys.argv[2], json.loads(sys.argv[3])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--streams", type=int, default=5000)
    ap.add_argument("--agents", type=int, default=500)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--deliveries", type=int, default=200)
    args = ap.parse_args()
    limit = raise_file_limit(args.streams + 1000)  # the gateway inherits it
    print(machine(), f"RLIMIT_NOFILE={limit}", flush=True)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
