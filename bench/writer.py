"""Writer benchmark: does a mail at the recipient cap hold the one writer long?

SQLite has one writer, so every write transaction delays every other. A mail
to 100,000 recipients once held it for 167 s, and a permission request waited
43.5 s behind one to 30,000. Now a mail has at most `max_recipients` (100) and
its recipients are looked up before the write transaction starts.

Measured on a real gateway subprocess (SQLite): the latency of an agent's
permission request, alone and while `--senders` humans keep sending mails to
100 recipients; and the latency of one 100-recipient send.

Usage: .venv/bin/python bench/writer.py [--requests 100] [--senders 2]
Prints its figures and the machine conditions; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx

from calibrate import calibrate, load, machine  # bench/: the script's folder is on sys.path
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"
USER_PASSWORD = "bench-user-password"
RECIPIENTS = 100


async def setup(http: httpx.AsyncClient, senders: int) -> tuple[dict[str, str], list[str], str]:
    """Tokens by name, the 100 recipient addresses, and a session claude asks in."""
    r = await http.post(
        "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    admin = {"Authorization": f"Bearer {r.json()['token']}"}
    tokens: dict[str, str] = {}
    people = ["ana", *(f"sender{i}" for i in range(senders))]
    for name in people:
        body = {"username": name, "password": USER_PASSWORD}
        await http.post("/api/v1/admin/users", json=body, headers=admin)
        r = await http.post("/api/v1/auth/login", json=body)
        tokens[name] = r.json()["token"]
    # Every sender may set every agent to work anywhere (docs/access.md).
    for name in [*(f"bot{i}" for i in range(RECIPIENTS)), "claude"]:
        agent = {"name": name, "workspaces": ["/**"], "taskers": people}
        r = await http.post("/api/v1/admin/agents", json=agent, headers=admin)
        tokens[name] = r.json()["key"]
    r = await http.post(
        "/api/v1/mail",
        json={"to": ["claude@/srv/bench.new"], "subject": "bench", "body": "go"},
        headers={"Authorization": f"Bearer {tokens['ana']}"},
    )
    return tokens, [f"bot{i}@/srv/wide" for i in range(RECIPIENTS)], r.json()["session_id"]


async def requests(
    http: httpx.AsyncClient, key: str, session_id: str, n: int, tag: str
) -> list[float]:
    ms = []
    for i in range(n):
        body = {
            "session_id": session_id,
            "tool_name": "Bash",
            "tool_input": {"command": f"echo {i}"},
            "relay_key": f"{tag}-{i}",
        }
        started = time.perf_counter()
        r = await http.post(
            "/api/v1/agent/permissions", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        ms.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 201, r.text
    return ms


async def send_wide(
    http: httpx.AsyncClient, token: str, to: list[str], stop: asyncio.Event, out: list[float]
) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        r = await http.post(
            "/api/v1/mail",
            json={"to": to, "subject": "to everyone", "body": "x" * 2000},
            headers={"Authorization": f"Bearer {token}"},
        )
        out.append((time.perf_counter() - started) * 1000)
        assert r.status_code == 201, r.text


async def run(n: int, senders: int, url: str) -> None:
    limits = httpx.Limits(max_connections=senders + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        tokens, wide, session_id = await setup(http, senders)
        cal = await calibrate(http, tokens["ana"])
        print(*cal.lines(), sep="\n")
        idle = await requests(http, tokens["claude"], session_id, n, "idle")
        print(summary("permission request, writer idle", idle), "|", cal.vs_get(pct(idle, 50)))
        stop, sends = asyncio.Event(), list[float]()
        tasks = [
            asyncio.create_task(send_wide(http, tokens[f"sender{i}"], wide, stop, sends))
            for i in range(senders)
        ]
        busy = await requests(http, tokens["claude"], session_id, n, "busy")
        stop.set()
        await asyncio.gather(*tasks)
        print(
            summary(f"permission request, {senders} senders of {RECIPIENTS}-recipient mails", busy),
            "|", cal.vs_get(pct(busy, 50)),
        )  # fmt: skip
        print(summary(f"{RECIPIENTS}-recipient send (concurrently)", sends), "|",
              f"{pct(sends, 50) * cal.commit_rate / 1000:.1f} x one raw commit")  # fmt: skip
        print(f"loadavg at the end: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--senders", type=int, default=2)
    args = parser.parse_args()
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
        gw = GatewayProcess(data_dir=Path(tmp) / "data", env=env)
        gw.start(timeout=180)  # a loaded machine takes long to import the gateway
        try:
            asyncio.run(run(args.requests, args.senders, gw.url))
        finally:
            gw.stop()


if __name__ == "__main__":
    main()
