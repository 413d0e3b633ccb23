"""Bridge overhead per turn: command runner, a trivial CLI, real gateway + bridge.

One human mails the agent 200 times in one session (full mode), each mail a
reply to the agent's previous answer. For each turn:

    overhead = (CLI started − mail stored) + (relay stored − CLI exited)

with "stored" the gateway's created_at of the mail and of the relay, and the
CLI's start and exit taken inside the CLI (same machine, same clock). It covers
what the bridge adds: the new_mail event reaching it, reading the mail, ledger
fsyncs, spawning the CLI, reading its output, posting the relay. Also printed:
the whole turn as the human sees it (send → relay on the human's SSE stream).

Usage: .venv/bin/python bench/bridge.py [--turns 200]
Prints its figures and the machine conditions; it is not a test. Target: p50 ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

import httpx

from calibrate import Calibration, calibrate, load, machine  # bench/: on sys.path
from mailui4agents.client import AsyncClient, ClientConfig
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"
# A trivial CLI: reads the prompt, records its own start and end (ns), answers "ok".
CLI = """#!/bin/sh
start=$(date +%s%N)
cat >/dev/null
end=$(date +%s%N)
echo "$AGENTMAIL_MAIL_ID $start $end" >> "$BENCH_LOG"
echo ok
"""


async def calibrate_on(url: str, token: str) -> Calibration:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return await calibrate(http, token)


def setup(url: str) -> tuple[str, str]:
    with httpx.Client(base_url=url, timeout=30) as http:
        r = http.post("/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        admin = {"Authorization": f"Bearer {r.json()['token']}"}
        http.post("/api/v1/admin/users", json={"username": "ana", "password": "bench-pass"},
                  headers=admin).raise_for_status()  # fmt: skip
        r = http.post("/api/v1/auth/login", json={"username": "ana", "password": "bench-pass"})
        ana = r.json()["token"]
        r = http.post(
            "/api/v1/admin/agents",
            json={"name": "bench", "workspaces": ["/**"], "owners": ["ana"]},
            headers=admin,
        )
        return ana, r.json()["key"]


Times = dict[str, tuple[float, float]]


async def run(url: str, ana: str, workspace: Path, turns: int) -> tuple[Times, Times]:
    """mail id -> (sent, reply seen) perf_counter s; mail id -> (mail, relay) created_at."""
    times: dict[str, tuple[float, float]] = {}
    created: dict[str, float] = {}
    relays: dict[str, str] = {}  # mail id -> the relay that answered it
    stored: dict[str, tuple[float, float]] = {}  # mail id -> (mail, relay) created_at
    replied: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
    connected = asyncio.Event()
    async with AsyncClient(ClientConfig(url=url, token=ana)) as client:

        async def listen() -> None:
            async with aclosing(client.events(on_connect=connected.set)) as events:
                async for event in events:
                    if event.type == "new_mail" and event.data.get("type") == "relay":
                        seen = time.perf_counter()
                        replied.put_nowait((str(event.data["in_reply_to"]), seen))
                        relays[str(event.data["in_reply_to"])] = str(event.data["mail_id"])
                        created[str(event.data["in_reply_to"])] = _epoch(event.data["created_at"])

        listener = asyncio.create_task(listen())
        await connected.wait()
        parent: str | None = None
        for n in range(turns + 1):  # the first turn warms up and is not counted
            to = f"bench@{workspace}" + ("" if parent else ".new")
            t0 = time.perf_counter()
            sent = await client.send_mail([to], f"turn {n}", "hello", parent_mail_id=parent,
                                          permission_mode=None if parent else "full")  # fmt: skip
            assert not isinstance(sent, dict)
            mail_id, seen = await asyncio.wait_for(replied.get(), 60)
            assert mail_id == sent.id, (mail_id, sent.id)
            if n:
                times[sent.id] = (t0, seen)
                stored[sent.id] = (sent.created_at.timestamp(), created[sent.id])
            parent = relays[sent.id]  # the human replies to the agent's answer
        listener.cancel()
    return times, stored


PHASES = (
    ("mail stored -> new_mail event at the bridge", "stored", "seen"),
    ("event -> turn starts (pool queue)", "seen", "start"),
    ("reading the mail (gateway round trip) + ledger", "start", "read"),
    ("prompt, runner, spawning the CLI", "read", "spawn"),
    ("CLI exit seen -> relay stored and ledger completed", "exit", "done"),
)


def breakdown(log: str, stored: Times, cli: Times) -> dict[str, list[float]]:
    """Per phase, the milliseconds of every counted turn (wall clock, one machine)."""
    out: dict[str, list[float]] = {name: [] for name, _, _ in PHASES}
    for line in log.splitlines():
        if " timing mail=" not in line:
            continue
        fields = dict(part.split("=", 1) for part in line.split(" timing ", 1)[1].split())
        mail = fields.pop("mail")
        if mail not in stored:
            continue
        marks = {k: float(v) for k, v in fields.items()}
        marks["stored"] = stored[mail][0]
        for name, a, b in PHASES:
            out[name].append((marks[b] - marks[a]) * 1000)
    return out


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        workspace, log, bridge_log = tmp / "work", tmp / "cli.log", tmp / "bridge.log"
        workspace.mkdir()
        cli = tmp / "cli.sh"
        cli.write_text(CLI)
        cli.chmod(0o755)
        gateway = GatewayProcess(
            data_dir=tmp / "data", env=clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
                                                 **FAST_HASH_ENV))  # fmt: skip
        gateway.start(timeout=180)
        bridge = None
        try:
            ana, key = setup(gateway.url)
            cal = asyncio.run(calibrate_on(gateway.url, ana))
            env = clean_env(AGENTMAIL_URL=gateway.url, AGENTMAIL_KEY=key, BENCH_LOG=str(log))
            bridge = subprocess.Popen(
                [sys.executable, "-m", "mailui4agents.cli.main", "bridge", "--agent", "bench",
                 "--runner", "command", "--state-dir", str(tmp / "state"), "--log-level",
                 "debug", "--workspace-root", f"{tmp}/**", "--", str(cli)],
                env=env, stderr=bridge_log.open("w"),
            )  # fmt: skip
            times, stored = asyncio.run(run(gateway.url, ana, workspace, args.turns))
        finally:
            if bridge is not None:
                bridge.terminate()
                bridge.wait(30)
            gateway.stop()
        cli: dict[str, tuple[float, float]] = {}
        for line in log.read_text().splitlines():
            mail_id, start, end = line.split()
            cli[mail_id] = (int(start) / 1e9, int(end) / 1e9)
        total = [(seen - sent) * 1000 for sent, seen in times.values()]
        before = [(cli[m][0] - mail) * 1000 for m, (mail, _) in stored.items()]
        after = [(relay - cli[m][1]) * 1000 for m, (_, relay) in stored.items()]
        overhead = [b + a for b, a in zip(before, after, strict=True)]
        phases = breakdown(bridge_log.read_text(), stored, cli)
    print(f"load average at the end: {load()}")
    print(*cal.lines(), sep="\n")
    print(summary("mail stored -> CLI started", before))
    print(summary("CLI exited -> relay stored", after))
    print(summary("bridge overhead per turn (the two above)", overhead), "|",
          cal.vs_get(pct(overhead, 50)), "|", cal.vs_pass(pct(overhead, 50)), "(p50)")  # fmt: skip
    print(summary("whole turn as the human sees it (send -> relay on SSE)", total), "|",
          cal.vs_get(pct(total, 50)), "(p50)")  # fmt: skip
    print("where the overhead goes (p50 ms, from the bridge's timing log):")
    for name, values in phases.items():
        print(f"  {name}: {sorted(values)[len(values) // 2]:.1f}")


if __name__ == "__main__":
    main()
