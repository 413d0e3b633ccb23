"""Approval round-trip benchmark: a real hook process, a real gateway, a scripted human.

Each run: start `agentmail hook claude-code` for a Bash call in a workspace-mode
mail session → the hook opens its event stream and posts the request → the
human, watching `GET /api/v1/events`, sees `permission_request` and approves →
the hook receives `permission_decision` and prints its allow. Runs are
sequential (one hook at a time).

Reported (ms): the whole round trip (spawn to the hook's exit); its parts
(spawn → request seen by the human; approval posted → hook exited); the floor,
a hook process that does nothing (a Read call, which never contacts the
gateway) and a bare `python -c pass`; and the overhead excluding Python
start-up = round trip minus the median floor.

With --in-process: the same round trip without a hook process (the path HAPI's
permission figure measures): the agent opens its event stream, posts the request
itself, the human approves on sight, and the agent's stream receives the decision
(agent_round_trips; bench/peers/hapi.py prints it beside HAPI's).

Usage: .venv/bin/python bench/approval.py [--runs 200] [--floor-runs 50] [--in-process]
Prints its figures and the machine conditions; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# bench/: the script's folder is on sys.path
from calibrate import bytecode, calibrate, load, machine
from mailui4agents.client.sse import SSEParser
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

ADMIN_PASSWORD = "bench-admin-password"
USER_PASSWORD = "bench-user-password"
HOOK = [sys.executable, "-m", "mailui4agents.cli.main", "hook", "claude-code"]


def claude_input(tool_name: str, tool_input: dict[str, Any], tool_use_id: str) -> bytes:
    payload = {
        "session_id": "bench-terminal",
        "transcript_path": "/tmp/bench.jsonl",
        "cwd": "/srv/bench",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": tool_use_id,
    }
    return json.dumps(payload).encode()


@dataclass
class Human:
    """Watches the human stream and approves every request at once."""

    http: httpx.AsyncClient
    token: str
    seen: dict[str, float] = field(default_factory=dict)  # relay key -> time seen
    posted: dict[str, float] = field(default_factory=dict)  # relay key -> approval sent
    answered: dict[str, float] = field(default_factory=dict)  # relay key -> approval stored
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    async def watch(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        async with self.http.stream("GET", "/api/v1/events", headers=headers, timeout=None) as r:
            assert r.status_code == 200
            self.opened.set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event != "permission_request":
                        continue
                    request = json.loads(ev.data)
                    key = request["relay_key"]
                    self.seen[key] = time.perf_counter()
                    self.posted[key] = time.perf_counter()
                    d = await self.http.post(
                        f"/api/v1/permissions/{request['id']}/decision",
                        json={"decision": "approve"},
                        headers={"Authorization": f"Bearer {self.token}"},
                    )
                    self.answered[key] = time.perf_counter()
                    assert d.status_code == 200, d.text


async def run_hook(stdin: bytes, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *HOOK,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode == 0, err.decode()
    return t0, json.loads(out)["hookSpecificOutput"]


async def bare_python() -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    return (time.perf_counter() - t0) * 1000


async def setup(http: httpx.AsyncClient) -> tuple[str, str, str]:
    """(ana's token, claude's key, a workspace-mode session of both)."""
    r = await http.post(
        "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    admin = {"Authorization": f"Bearer {r.json()['token']}"}
    r = await http.post(
        "/api/v1/admin/users", json={"username": "ana", "password": USER_PASSWORD}, headers=admin
    )
    assert r.status_code == 201, r.text
    r = await http.post("/api/v1/auth/login", json={"username": "ana", "password": USER_PASSWORD})
    ana = r.json()["token"]
    r = await http.post(
        "/api/v1/admin/agents",
        json={"name": "claude", "workspaces": ["/**"], "taskers": ["ana"]},
        headers=admin,
    )
    key = r.json()["key"]
    r = await http.post(
        "/api/v1/mail",
        json={"to": ["claude@/srv/bench.new"], "subject": "bench", "body": "go",
              "permission_mode": "workspace"},
        headers={"Authorization": f"Bearer {ana}"},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return ana, key, r.json()["session_id"]


#: The steps of an in-process round trip, as agent_round_trips measures them.
PARTS = (
    "  agent's request POST (answered)",
    "  agent's POST sent -> request seen by the human (SSE)",
    "  the human's decision POST (answered)",
    "  decision POST sent -> decision on the agent's stream",
)


async def agent_round_trips(
    http: httpx.AsyncClient,
    ana: str,
    key: str,
    session: str,
    runs: int,
    parts: dict[str, list[float]] | None = None,
) -> list[float]:
    """ms from the agent's `POST /agent/permissions` to `permission_decision` on its
    own event stream, with a human who approves on sight; no process is started.
    `parts`, if given, gets each run's steps (ms) under PARTS' names."""
    human = Human(http, ana)
    decided: dict[str, float] = {}
    waiters: dict[str, asyncio.Event] = {}
    opened = asyncio.Event()
    agent = {"Authorization": f"Bearer {key}"}

    async def agent_stream() -> None:
        headers = {**agent, "Accept": "text/event-stream"}
        async with http.stream("GET", "/api/v1/agent/events", headers=headers, timeout=None) as r:
            assert r.status_code == 200
            opened.set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event == "permission_decision":
                        relay = json.loads(ev.data)["relay_key"]
                        decided[relay] = time.perf_counter()
                        waiters.setdefault(relay, asyncio.Event()).set()

    tasks = [asyncio.create_task(human.watch()), asyncio.create_task(agent_stream())]
    try:
        await asyncio.wait_for(asyncio.gather(human.opened.wait(), opened.wait()), 30)
        out = []
        for _ in range(runs):
            relay = f"bench-{uuid.uuid4().hex}"
            t0 = time.perf_counter()
            r = await http.post(
                "/api/v1/agent/permissions",
                json={"session_id": session, "relay_key": relay, "tool_name": "Bash",
                      "tool_input": {"command": "npm test"}},
                headers=agent,
            )  # fmt: skip
            answered = time.perf_counter()
            assert r.status_code == 201, r.text
            await asyncio.wait_for(waiters.setdefault(relay, asyncio.Event()).wait(), 30)
            out.append((decided[relay] - t0) * 1000)
            if parts is not None:
                steps = (answered - t0, human.seen[relay] - t0,
                         human.answered[relay] - human.posted[relay],
                         decided[relay] - human.posted[relay])  # fmt: skip
                for name, step in zip(PARTS, steps, strict=True):
                    parts.setdefault(name, []).append(step * 1000)
        return out
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def in_process(runs: int) -> None:
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(
            data_dir=Path(tmp) / "data",
            env=clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV),
        )
        gw.start(timeout=180)
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
                ana, key, session = await setup(http)
                cal = await calibrate(http, ana)
                parts: dict[str, list[float]] = {}
                trips = await agent_round_trips(http, ana, key, session, runs, parts)
        finally:
            gw.stop()
    print("gateway: one `agentmail serve` subprocess, SQLite (WAL) in a temp dir, loopback;")
    print("agent: this process (no hook process): request POST -> decision on its stream")
    print(*cal.lines(), sep="\n")
    print(summary("round trip (agent POST -> human approves -> agent stream)", trips))
    for name in PARTS:
        print(summary(name, parts[name]))
    # The round trip is two HTTP requests, each seen on a stream about when it is
    # answered: two bare authenticated requests are its floor on this stack.
    print(f"floor: two bare authenticated GETs, {2 * cal.get_p50_ms:.2f} ms (p50 x 2)")
    print(f"loadavg at the end: {load()}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--floor-runs", type=int, default=50)
    ap.add_argument("--in-process", action="store_true", help="no hook process: see above")
    args = ap.parse_args()
    bytecode()
    if args.in_process:
        await in_process(args.runs)
        return
    print(machine(), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(
            data_dir=Path(tmp) / "data",
            env=clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV),
        )
        gw.start(timeout=180)  # a loaded machine takes long to import the gateway
        try:
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
                ana, key, session = await setup(http)
                cal = await calibrate(http, ana)
                env = clean_env(
                    AGENTMAIL_URL=gw.url,
                    AGENTMAIL_KEY=key,
                    AGENTMAIL_SESSION_ID=session,
                    AGENTMAIL_HOOK_TIMEOUT="60",
                    HOME=tmp,
                    XDG_CONFIG_HOME=str(Path(tmp) / "config"),
                )
                human = Human(http, ana)
                watcher = asyncio.create_task(human.watch())
                await asyncio.wait_for(human.opened.wait(), 30)

                floor, bare = [], []
                for i in range(args.floor_runs):
                    stdin = claude_input("Read", {"file_path": "/srv/bench/a.py"}, f"r{i}")
                    t0, out = await run_hook(stdin, env)
                    floor.append((time.perf_counter() - t0) * 1000)
                    assert out["permissionDecision"] == "allow"
                    bare.append(await bare_python())

                total, to_seen, after_approval, decide_call = [], [], [], []
                for _ in range(args.runs):
                    tool_use_id = f"toolu_{uuid.uuid4().hex}"
                    stdin = claude_input("Bash", {"command": "npm test"}, tool_use_id)
                    t0, out = await run_hook(stdin, env)
                    t_end = time.perf_counter()
                    assert out["permissionDecision"] == "allow", out
                    [relay] = [k for k in human.seen if k.endswith(tool_use_id)]
                    total.append((t_end - t0) * 1000)
                    to_seen.append((human.seen[relay] - t0) * 1000)
                    after_approval.append((t_end - human.posted[relay]) * 1000)
                    decide_call.append((human.answered[relay] - human.posted[relay]) * 1000)
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
        finally:
            gw.stop()

    floor_p50 = pct(floor, 50)
    overhead = [t - floor_p50 for t in total]
    print("gateway: one `agentmail serve` subprocess, SQLite (WAL) in a temp dir, loopback;")
    print("hook: `python -m mailui4agents.cli.main hook claude-code`, one process per run")
    print(*cal.lines(), sep="\n")
    print(summary("round trip (spawn -> approved -> hook printed allow)", total))
    print(summary("  spawn -> request seen by the human (SSE)", to_seen))
    print(summary("  approval posted -> hook exited", after_approval))
    print(summary("    of which the decision POST itself", decide_call))
    print(
        summary("floor: hook for a Read call (no gateway contact)", floor),
        "|", cal.vs_pass(floor_p50), "(p50)",
    )  # fmt: skip
    print(summary("floor: bare `python -c pass`", bare))
    print(
        summary(f"overhead excluding Python start-up (round trip - {floor_p50:.1f})", overhead),
        "|", cal.vs_get(pct(overhead, 50)), "(p50)",
    )  # fmt: skip
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
