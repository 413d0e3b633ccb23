"""Push latency: enqueue → the push service's receipt, against a real gateway subprocess
(SQLite in a temp dir) and the fake push service of the tests on 127.0.0.1
(tests/fakes/push_service.py: it checks the VAPID JWT and decrypts every push).

Measures, sequentially (one push in flight at a time):
  1. `POST /api/v1/push/test` → receipt at the push service (the push is queued
     in the request's transaction, the sender is woken by the commit, encrypts,
     signs and POSTs): p50/p99 over --pushes.
  2. An agent's `POST /api/v1/agent/permissions` → receipt of the request's
     notification (the request, its mail, its action token and its push in one
     transaction): p50/p99 over --requests. Each is then approved from its
     notification, and its "Already handled" push awaited, before the next.
  3. A notification's action (`POST /api/v1/push/actions`) → exit of the
     `agentmail hook claude-code` process waiting for that request: p50/p99
     over --hooks.

`measure_push_latency(trigger, service, name, n)` is the reusable part: `trigger(i)`
does whatever makes the gateway push once to the subscription `name` (a test push
here; a permission request for bench extensions), and the time from just before
it to the push service's receipt is recorded (both clocks are this process's).

Usage: .venv/bin/python bench/push.py [--pushes 200] [--requests 200] [--hooks 20]
Prints its figures with the calibration (bench/calibrate.py); it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from calibrate import calibrate, load, machine  # bench/: the script's folder is on sys.path
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from stats import pct, summary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests.fakes
from tests.fakes.push_service import PushService, push_service

ADMIN_PASSWORD = "bench-admin-password"
PASSWORD = "bench-password"

Trigger = Callable[[int], Awaitable[object]]


async def measure_push_latency(
    trigger: Trigger, service: PushService, name: str, n: int, *, each_within_s: float = 30.0
) -> list[float]:
    """Milliseconds from just before `trigger(i)` to the push service's receipt of
    the push it caused at subscription `name`, for i in 0..n-1, one at a time.
    The push is the first message to `name` after the trigger started (pushes are
    sequential, so nothing else is in flight)."""
    out: list[float] = []
    for i in range(n):
        before = len(service.received(name))
        started = time.monotonic()
        await trigger(i)
        got = await service.wait_async(before + 1, name, within_s=each_within_s)
        out.append((got[before].received_mono - started) * 1000)
    return out


async def login(http: httpx.AsyncClient, username: str, password: str) -> str:
    r = await http.post("/api/v1/auth/login", json={"username": username, "password": password})
    r.raise_for_status()
    token: str = r.json()["token"]
    return token


async def setup(http: httpx.AsyncClient, service: PushService) -> tuple[str, str]:
    """ana, with one device subscribed at the push service: (her token, the subscription)."""
    admin = await login(http, "admin", ADMIN_PASSWORD)
    r = await http.post(
        "/api/v1/admin/users",
        json={"username": "ana", "password": PASSWORD},
        headers={"Authorization": f"Bearer {admin}"},
    )
    r.raise_for_status()
    ana = await login(http, "ana", PASSWORD)
    sub = service.make_subscription("ana-phone")
    r = await http.post(
        "/api/v1/push/subscriptions",
        json={**sub.to_json(), "device_name": "Ana's phone"},
        headers={"Authorization": f"Bearer {ana}"},
    )
    r.raise_for_status()
    return ana, sub.name


async def agent_session(http: httpx.AsyncClient, ana: str) -> tuple[str, str]:
    """An agent `bot` owned by ana and a session ana started with it: (its key, the session)."""
    admin = await login(http, "admin", ADMIN_PASSWORD)
    r = await http.post(
        "/api/v1/admin/agents",
        json={"name": "bot", "owners": ["admin", "ana"], "workspaces": ["/**"],
              "max_mode": {"owners": "full", "taskers": "full"}},
        headers={"Authorization": f"Bearer {admin}"},
    )  # fmt: skip
    r.raise_for_status()
    key: str = r.json()["key"]
    r = await http.post(
        "/api/v1/mail",
        json={"to": ["bot@/srv/bench.new"], "subject": "bench", "body": "go"},
        headers={"Authorization": f"Bearer {ana}"},
    )
    r.raise_for_status()
    return key, str(r.json()["session_id"])


async def requests_pushed(
    http: httpx.AsyncClient, service: PushService, name: str, key: str, sid: str, n: int
) -> list[float]:
    """2.: permission POST → its notification at the push service; each approved
    from its notification (and the "Already handled" awaited) before the next."""
    agent = {"Authorization": f"Bearer {key}"}

    async def ask(_i: int) -> None:
        r = await http.post(
            "/api/v1/agent/permissions",
            json={"session_id": sid, "tool_name": "Bash", "tool_input": {"command": "make"},
                  "relay_key": uuid.uuid4().hex},
            headers=agent,
        )  # fmt: skip
        r.raise_for_status()

    out: list[float] = []
    for i in range(n):
        [ms] = await measure_push_latency(ask, service, name, 1)
        out.append(ms)
        pushed = service.received(name)[-1].payload
        assert pushed["type"] == "permission_request", pushed
        before = len(service.received(name))
        r = await http.post(
            "/api/v1/push/actions", json={"token": pushed["action_token"], "action": "approve"}
        )
        r.raise_for_status()
        handled = await service.wait_async(before + 1, name, within_s=30)
        assert handled[before].payload["type"] == "decided", (i, handled[before].payload)
    return out


HOOK_INPUT = {
    "session_id": "bench-push", "transcript_path": "/tmp/bench.jsonl", "cwd": "/srv/bench",
    "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
    "tool_input": {"command": "make deploy"},
}  # fmt: skip


async def hooks_answered(
    http: httpx.AsyncClient, service: PushService, name: str, env: dict[str, str], n: int
) -> list[float]:
    """3.: a notification's action → exit of the hook process waiting for it."""
    out: list[float] = []
    for i in range(n):
        before = len(service.received(name))
        stdin = json.dumps({**HOOK_INPUT, "tool_use_id": f"toolu_bench_{i}_{uuid.uuid4().hex}"})
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mailui4agents.cli.main", "hook", "claude-code",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(stdin.encode())
        await proc.stdin.drain()
        proc.stdin.close()
        got = await service.wait_async(before + 1, name, within_s=60)
        pushed = got[before].payload
        started = time.monotonic()
        r = await http.post(
            "/api/v1/push/actions", json={"token": pushed["action_token"], "action": "approve"}
        )
        r.raise_for_status()
        stdout, stderr = await proc.communicate()
        out.append((time.monotonic() - started) * 1000)
        decided = json.loads(stdout)["hookSpecificOutput"]["permissionDecision"]
        assert decided == "allow", (stdout, stderr)
        await service.wait_async(before + 2, name, within_s=30)  # its "Already handled"
    return out


async def run(n: int, url: str, service: PushService, requests: int, hooks: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        ana, name = await setup(http, service)
        cal = await calibrate(http, ana)
        print(*cal.lines(), sep="\n")

        async def test_push(_i: int) -> None:
            r = await http.post("/api/v1/push/test", headers={"Authorization": f"Bearer {ana}"})
            r.raise_for_status()
            [item] = r.json()["items"]
            assert item["status_code"] == 201, item

        await measure_push_latency(test_push, service, name, 5)  # warm-up
        ms = await measure_push_latency(test_push, service, name, n)
        print(summary("POST /push/test → push service receipt", ms), "|", cal.vs_get(pct(ms, 50)))
        key, sid = await agent_session(http, ana)
        await requests_pushed(http, service, name, key, sid, 5)  # warm-up
        ms = await requests_pushed(http, service, name, key, sid, requests)
        line = summary("POST /agent/permissions → its notification at the push service", ms)
        print(line, "|", cal.vs_get(pct(ms, 50)))
        with tempfile.TemporaryDirectory() as home:
            env = clean_env(
                AGENTMAIL_URL=url, AGENTMAIL_KEY=key, AGENTMAIL_SESSION_ID=sid, HOME=home,
                AGENTMAIL_DATA_DIR=os.path.join(home, "data"),
                XDG_CONFIG_HOME=os.path.join(home, ".config"),
            )  # fmt: skip
            ms = await hooks_answered(http, service, name, env, hooks)
        print(summary("POST /push/actions → the waiting hook's exit", ms))
        print(f"loadavg at the end: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--hooks", type=int, default=20)
    args = parser.parse_args()
    print(machine(), flush=True)
    with push_service() as service, tempfile.TemporaryDirectory() as tmp:
        env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
        gw = GatewayProcess(
            data_dir=Path(tmp) / "data",
            env=env,
            extra_args=["--push-endpoint-allow", f"{service.url}/push/"],
        )
        gw.start(timeout=180)  # a loaded machine takes long to import the gateway
        try:
            asyncio.run(run(args.pushes, gw.url, service, args.requests, args.hooks))
        finally:
            gw.stop()


if __name__ == "__main__":
    main()
