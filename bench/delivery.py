"""Delivery benchmark against a real gateway subprocess (SQLite in a temp dir).

Measures:
  1. sequential send latency (one human sends, one request at a time);
  2. send → SSE delivery latency with N agents connected (p50/p95/p99);
  3. throughput with 8 concurrent senders;
  4. sequential send latency again with N SSE streams open on the recipient
     (every send wakes all of them), to compare with none (target: within 2x).

Usage: .venv/bin/python bench/delivery.py [--sequential 300] [--agents 50]
       [--deliveries 500] [--senders 8] [--per-sender 250] [--streams 200]
       [--database-url postgresql://user@host:port/empty_db]
       [--profile OUT.txt] [--profile-streams OUT.txt]   (py-spy on the gateway: phases 1-3, 4)
Prints its figures, each with its ratio to the same run's calibration
(bench/calibrate.py), and the machine conditions; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from calibrate import calibrate, cpu_s, load, machine  # bench/: the script's folder is on sys.path
from mailui4agents.client.sse import SSEParser
from mailui4agents.testing import GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"


async def setup(http: httpx.AsyncClient, agents: int) -> tuple[str, list[str]]:
    r = await http.post(
        "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    admin = {"Authorization": f"Bearer {r.json()['token']}"}
    await http.post(
        "/api/v1/admin/users",
        json={"username": "ana", "password": "bench-password"},
        headers=admin,
    )
    r = await http.post(
        "/api/v1/auth/login", json={"username": "ana", "password": "bench-password"}
    )
    ana = r.json()["token"]
    keys = []
    for i in range(agents):
        r = await http.post(
            "/api/v1/admin/agents",
            json={"name": f"agent{i}", "workspaces": ["/**"], "taskers": ["ana"]},
            headers=admin,
        )
        keys.append(r.json()["key"])
    return ana, keys


async def sequential(http: httpx.AsyncClient, ana: str, n: int) -> list[float]:
    headers = {"Authorization": f"Bearer {ana}"}
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r = await http.post(
            "/api/v1/mail",
            json={"to": ["agent0@/srv/bench"], "subject": f"seq {i}", "body": "x" * 200},
            headers=headers,
        )
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 201, r.text
    return out


async def delivery(url: str, ana: str, keys: list[str], n: int) -> list[float]:
    received: dict[str, float] = {}
    waiters: dict[str, asyncio.Event] = {}
    opened = 0
    all_open = asyncio.Event()

    async def listen(key: str) -> None:
        nonlocal opened
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as c,
            c.stream("GET", "/api/v1/agent/events", headers=headers) as r,
        ):
            opened += 1
            if opened == len(keys):
                all_open.set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event == "new_mail":
                        mail_id = json.loads(ev.data)["mail_id"]
                        received[mail_id] = time.perf_counter()
                        waiters.setdefault(mail_id, asyncio.Event()).set()

    tasks = [asyncio.create_task(listen(k)) for k in keys]
    await asyncio.wait_for(all_open.wait(), 60)
    latencies = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        headers = {"Authorization": f"Bearer {ana}"}
        for i in range(n):
            target = f"agent{i % len(keys)}@/srv/bench"
            t0 = time.perf_counter()
            r = await http.post(
                "/api/v1/mail",
                json={"to": [target], "subject": f"d {i}", "body": "y" * 200},
                headers=headers,
            )
            assert r.status_code == 201, r.text
            mail_id = r.json()["id"]
            await asyncio.wait_for(waiters.setdefault(mail_id, asyncio.Event()).wait(), 30)
            latencies.append((received[mail_id] - t0) * 1000)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


async def listen_forever(url: str, key: str, streams: int) -> None:
    """`--listen` mode, run in a child process so that reading the streams does
    not slow the sender's event loop: open the streams over plain sockets (the
    cheapest reader, so the figures are the gateway's cost), print "ready", and
    drain them until killed."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    request = (
        f"GET /api/v1/agent/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    opened = 0
    all_open = asyncio.Event()

    async def listen() -> None:
        nonlocal opened
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        status = await reader.readline()
        assert b" 200 " in status, status
        opened += 1
        if opened == streams:
            all_open.set()
        while await reader.read(65536):
            pass

    tasks = [asyncio.create_task(listen()) for _ in range(streams)]
    await all_open.wait()
    print("ready", flush=True)
    await asyncio.gather(*tasks)


async def with_streams(
    url: str, ana: str, key: str, streams: int, n: int, gateway_pid: int, profile: Any = None
) -> tuple[list[float], float]:
    """Sequential sends to agent0 while `streams` SSE streams of agent0 are open
    (held by a child process): their latencies, and the gateway's CPU ms per
    send (which the child's reading, on the same cores, does not inflate)."""
    child = None
    if streams:
        child = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--listen", url, key, str(streams),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 120)
        assert line.strip() == b"ready", line
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            spy = profile() if profile is not None else None
            try:
                before = cpu_s(gateway_pid)
                latencies = await sequential(http, ana, n)
                used = cpu_s(gateway_pid) - before
            finally:
                if spy is not None:
                    stop_profile(spy)
            return latencies, used * 1000 / n
    finally:
        if child is not None:
            child.terminate()
            await child.wait()


async def throughput(url: str, ana: str, senders: int, per_sender: int) -> tuple[int, float]:
    headers = {"Authorization": f"Bearer {ana}"}
    limits = httpx.Limits(max_connections=senders)

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

        async def sender(s: int) -> None:
            for i in range(per_sender):
                r = await http.post(
                    "/api/v1/mail",
                    json={"to": [f"agent{s}@/srv/bench"], "subject": f"t {i}", "body": "z"},
                    headers=headers,
                )
                assert r.status_code == 201, r.text

        t0 = time.perf_counter()
        await asyncio.gather(*(sender(s) for s in range(senders)))
        elapsed = time.perf_counter() - t0
    return senders * per_sender, elapsed


async def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--listen":
        await listen_forever(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sequential", type=int, default=300)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--deliveries", type=int, default=500)
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--per-sender", type=int, default=250)
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument(
        "--database-url", default=None, help="an EMPTY PostgreSQL database (default: SQLite)"
    )
    ap.add_argument("--profile", help="write py-spy's top functions (phases 1-3) to this file")
    ap.add_argument("--profile-streams", help="the same for phase 4 with the streams open")
    args = ap.parse_args()
    print(machine(), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(
            data_dir=Path(tmp) / "data",
            # 50 agents means 50 new sessions in a minute: above the default
            # per-sender rate limit, which this benchmark does not measure.
            env=clean_env(
                AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, AGENTMAIL_SESSION_RATE_LIMIT="100000"
            ),
            extra_args=["--database-url", args.database_url] if args.database_url else [],
        )
        gw.start(timeout=180)  # a loaded machine: imports and PostgreSQL migrations take a while
        spy = None
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
                ana, keys = await setup(http, max(args.agents, args.senders))
                cal = await calibrate(http, ana)
                if args.profile:
                    spy = start_profile(gw, args.profile)
                seq = await sequential(http, ana, args.sequential)
            lat = await delivery(gw.url, ana, keys[: args.agents], args.deliveries)
            count, elapsed = await throughput(gw.url, ana, args.senders, args.per_sender)
            if spy is not None:
                stop_profile(spy)
            assert gw.proc is not None
            pid = gw.proc.pid
            none, none_cpu = await with_streams(gw.url, ana, keys[0], 0, args.sequential, pid)
            profile = None
            if args.profile_streams:
                profile = functools.partial(start_profile, gw, args.profile_streams)
            many, many_cpu = await with_streams(
                gw.url, ana, keys[0], args.streams, args.sequential, pid, profile
            )
        finally:
            if spy is not None and spy.poll() is None:
                spy.kill()
            gw.stop()

    if args.database_url:
        print("gateway: one `agentmail serve` subprocess, PostgreSQL at", args.database_url)
    else:
        print("gateway: one `agentmail serve` subprocess, SQLite (WAL) in a temp dir, loopback")
    print(*cal.lines(), sep="\n")
    print(summary("sequential send latency", seq), "|", cal.vs_get(pct(seq, 50)), "(p50)")
    print(
        summary(f"send->SSE delivery latency, {args.agents} agents connected", lat),
        "|", cal.vs_get(pct(lat, 50)), "(p50)",
    )  # fmt: skip
    rate = count / elapsed
    print(
        f"throughput, {args.senders} concurrent senders: {count} mails in {elapsed:.2f} s "
        f"= {rate:.0f} mails/s | {cal.rate(rate)}"
    )
    print(summary("send latency, no SSE stream open", none))
    print(summary(f"send latency, {args.streams} SSE streams of the recipient open", many))
    print(f"p50 ratio, {args.streams} streams / none: {pct(many, 50) / pct(none, 50):.2f}")
    print(
        f"gateway CPU per send, none / {args.streams} streams open: {none_cpu:.2f} / "
        f"{many_cpu:.2f} ms = {(many_cpu - none_cpu) * 1000 / args.streams:.1f} us a stream"
    )
    print(f"loadavg at the end: {load()}")


def start_profile(gw: GatewayProcess, out: str) -> subprocess.Popen[bytes]:
    """py-spy (a dev dependency) sampling the gateway until stop_profile()."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    assert gw.proc is not None
    return subprocess.Popen(
        [exe, "record", "--pid", str(gw.proc.pid), "--format", "raw", "--output", out,
         "--rate", "200", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop_profile(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
    spy.wait(60)


if __name__ == "__main__":
    asyncio.run(main())
