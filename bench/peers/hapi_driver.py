"""Drives a running HAPI hub over its own API; run by bench/peers/hapi.py, not by hand.

It runs inside the hub's network namespace with the driver's own virtualenv
(httpx, python-socketio; pinned in constraints.txt) and imports nothing of ours.
HAPI's contract, as bench/peers/README.md describes it:
  - web client: `POST /api/auth {accessToken}` → a JWT; `POST /api/sessions/:id/messages
    {text, localId}`; SSE `GET /api/events?all=true` (`session-updated`, …);
    `POST /api/sessions/:sid/permissions/:rid/approve`;
  - agent CLI: `POST /cli/sessions` with the CLI token; socket.io namespace `/cli`, auth
    {token, clientType: "session-scoped", sessionId}; `session-alive` every 2 s; a new
    message arrives as `update` (body.t == "new-message"); a permission request is
    `update-state` with agentState.requests[rid]; the answer comes as `rpc-request`
    `<sid>:permission`, which the agent acks.

The fake agents (one socket.io client per session) live in a child process, so
that receiving does not slow the poster. Times cross the process boundary as
time.perf_counter() (CLOCK_MONOTONIC, one clock for the whole machine).

Prints one JSON object: the samples (ms) of each path and the hub's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

DEADLINE_S = 30.0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- the agents (child)


async def agents(url: str, token: str, sids: list[str]) -> None:
    import socketio

    clients: dict[str, Any] = {}
    version: dict[str, int] = {sid: 1 for sid in sids}  # a new session's agentStateVersion
    asked_at: dict[str, float] = {}
    pending: set[asyncio.Task[None]] = set()  # state updates in flight, kept referenced

    def later(state_update: Any) -> None:
        task = asyncio.get_running_loop().create_task(state_update)
        pending.add(task)
        task.add_done_callback(pending.discard)

    async def set_state(sid: str, state: dict[str, Any]) -> None:
        ack = await clients[sid].call(
            "update-state",
            {"sid": sid, "expectedVersion": version[sid], "agentState": state},
            namespace="/cli",
            timeout=DEADLINE_S,
        )
        if "version" in ack:
            version[sid] = ack["version"]
        if ack.get("result") != "success":
            emit({"ev": "error", "what": f"update-state: {ack}"})

    def client(sid: str) -> Any:
        sio = socketio.AsyncClient(reconnection=False)

        @sio.on("update", namespace="/cli")
        async def on_update(data: Any, *_: Any) -> None:
            now = time.perf_counter()
            body = (data or {}).get("body") or {}
            if body.get("t") != "new-message":
                return
            local_id = (body.get("message") or {}).get("localId")
            emit({"ev": "message", "id": local_id, "t": now})
            if local_id:  # the real CLI marks what it takes into a turn
                await sio.emit(
                    "messages-consumed", {"sid": sid, "localIds": [local_id]}, namespace="/cli"
                )

        @sio.on("rpc-request", namespace="/cli")
        async def on_rpc(data: Any) -> str:
            now = time.perf_counter()
            params = json.loads(data.get("params") or "{}")
            if str(data.get("method", "")).endswith(":permission"):
                rid = params.get("id")
                emit({"ev": "decision", "id": rid, "t0": asked_at.pop(rid, None), "t1": now})
                done = int(time.time() * 1000)
                completed = {
                    "tool": "Bash", "arguments": {"command": "ls"}, "createdAt": done,
                    "completedAt": done, "status": "approved", "decision": "approved",
                }  # fmt: skip
                later(set_state(sid, {"requests": {}, "completedRequests": {rid: completed}}))
            return json.dumps({"ok": True})  # the ack the hub waits for

        return sio

    async def connect(sid: str) -> None:
        sio = clients[sid] = client(sid)
        await sio.connect(
            url,
            namespaces=["/cli"],
            transports=["websocket"],
            auth={"token": token, "clientType": "session-scoped", "sessionId": sid},
            wait_timeout=DEADLINE_S,
        )
        await sio.emit("rpc-register", {"method": f"{sid}:permission"}, namespace="/cli")
        await alive(sid)

    async def alive(sid: str) -> None:
        await clients[sid].emit(
            "session-alive",
            {"sid": sid, "time": int(time.time() * 1000), "thinking": False, "mode": "remote"},
            namespace="/cli",
        )

    for i in range(0, len(sids), 10):
        await asyncio.gather(*(connect(s) for s in sids[i : i + 10]))

    async def keep_alive() -> None:
        while True:
            await asyncio.sleep(2)  # the real CLI's period; a session lapses after 30 s
            await asyncio.gather(*(alive(s) for s in sids))

    beat = asyncio.create_task(keep_alive())
    emit({"ev": "ready"})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        words = line.decode().split()
        if words[:1] == ["ask"]:
            sid, rid = sids[int(words[1])], words[2]
            asked_at[rid] = time.perf_counter()
            request = {"tool": "Bash", "arguments": {"command": "ls"},
                       "createdAt": int(time.time() * 1000)}  # fmt: skip
            later(set_state(sid, {"requests": {rid: request}}))
    beat.cancel()
    await asyncio.gather(beat, *pending, return_exceptions=True)
    await asyncio.gather(*(c.disconnect() for c in clients.values()))


class Agents:
    """The child process and what it reported."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.seen: dict[str, dict[str, Any]] = {}
        self.events: dict[str, asyncio.Event] = {}
        self.ready = asyncio.Event()
        self.errors: list[str] = []

    def event(self, key: str) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    async def start(self, url: str, token: str, sids: list[str]) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--agents", url, token, ",".join(sids),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        asyncio.get_running_loop().create_task(self._read())
        await asyncio.wait_for(self.ready.wait(), 120)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            ev = json.loads(line)
            if ev["ev"] == "ready":
                self.ready.set()
            elif ev["ev"] in ("message", "decision"):
                self.seen[ev["id"]] = ev
                self.event(ev["id"]).set()
            else:
                self.errors.append(str(ev))

    def ask(self, index: int, rid: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"ask {index} {rid}\n".encode())

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 15)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# ---------------------------------------------------------------- the web clients


class Phone:
    """A second web client on the SSE stream that approves each request it sees."""

    def __init__(self, http: httpx.AsyncClient, jwt: str) -> None:
        self.http, self.jwt = http, jwt
        self.connected = asyncio.Event()
        self.approved: set[str] = set()
        self.errors: list[str] = []

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.jwt}", "Accept": "text/event-stream"}
        params = {"all": "true", "visibility": "visible"}
        async with self.http.stream(
            "GET", "/api/events", params=params, headers=headers, timeout=None
        ) as r:
            data: list[str] = []
            async for line in r.aiter_lines():  # httpx undoes the hub's gzip
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                    continue
                if line or not data:
                    continue
                ev, data = json.loads("\n".join(data)), []
                if ev.get("type") == "connection-changed":
                    self.connected.set()
                elif ev.get("type") == "session-updated":
                    state = ((ev.get("data") or {}).get("agentState") or {}).get("value") or {}
                    for rid in state.get("requests") or {}:
                        if rid not in self.approved:
                            self.approved.add(rid)
                            asyncio.get_running_loop().create_task(
                                self.approve(ev["sessionId"], rid)
                            )

    async def approve(self, sid: str, rid: str) -> None:
        r = await self.http.post(
            f"/api/sessions/{sid}/permissions/{rid}/approve",
            json={"decision": "approved"},
            headers={"Authorization": f"Bearer {self.jwt}"},
        )
        if r.status_code != 200:
            self.errors.append(f"approve {r.status_code} {r.text[:200]}")


async def wait_healthy(http: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if (await http.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the hub did not answer /health within 60 s")
        await asyncio.sleep(0.1)


async def wait_active(http: httpx.AsyncClient, jwt: str, sids: list[str]) -> None:
    deadline = time.monotonic() + 60
    headers = {"Authorization": f"Bearer {jwt}"}
    while True:
        states = [
            (await http.get(f"/api/sessions/{sid}", headers=headers)).json()
            for sid in (sids[0], sids[-1])
        ]
        if all(s.get("session", {}).get("active") for s in states):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("HAPI's sessions did not become active within 60 s")
        await asyncio.sleep(0.1)


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=args.url, timeout=DEADLINE_S) as http:
        await wait_healthy(http)
        jwts = []
        for _ in range(2):  # the poster and the phone
            r = await http.post("/api/auth", json={"accessToken": args.token})
            r.raise_for_status()
            jwts.append(r.json()["token"])
        poster = {"Authorization": f"Bearer {jwts[0]}"}
        sids = []
        for i in range(max(args.agents, args.senders)):
            r = await http.post(
                "/cli/sessions",
                json={"tag": f"bench-{run}-{i}", "agentState": None,
                      "metadata": {"path": f"/srv/bench/{i}", "host": "bench", "flavor": "claude"}},
                headers={"Authorization": f"Bearer {args.token}"},
            )  # fmt: skip
            r.raise_for_status()
            sids.append(r.json()["session"]["id"])

        async def post(client: httpx.AsyncClient, sid: str, text: str, local_id: str) -> None:
            r = await client.post(
                f"/api/sessions/{sid}/messages",
                json={"text": text, "localId": local_id},
                headers=poster,
            )
            assert r.status_code == 200, (r.status_code, r.text[:300])

        out: dict[str, Any] = {}
        fakes = Agents()
        await fakes.start(args.url, args.token, sids)
        try:
            await wait_active(http, jwts[0], sids)
            get_ms = []
            for _ in range(200):
                t0 = time.perf_counter()
                r = await http.get(f"/api/sessions/{sids[0]}", headers=poster)
                get_ms.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200
            out["bare_get"] = get_ms

            seq, before = [], cpu_s(args.hub_pid)
            for i in range(args.sequential):
                t0 = time.perf_counter()
                await post(http, sids[0], "x" * 200, f"s-{run}-{i}")
                seq.append((time.perf_counter() - t0) * 1000)
            out["sequential"] = seq
            out["cpu_per_post_ms"] = (cpu_s(args.hub_pid) - before) * 1000 / args.sequential

            delivered = []
            for i in range(args.deliveries):
                local_id = f"d-{run}-{i}"
                t0 = time.perf_counter()
                await post(http, sids[i % args.agents], "y" * 200, local_id)
                await asyncio.wait_for(fakes.event(local_id).wait(), DEADLINE_S)
                delivered.append((fakes.seen[local_id]["t"] - t0) * 1000)
            out["post_to_agent"] = delivered

            phone = Phone(http, jwts[1])
            watching = asyncio.create_task(phone.run())
            await asyncio.wait_for(phone.connected.wait(), DEADLINE_S)
            round_trips = []
            for i in range(args.permissions):
                rid = f"p-{run}-{i}"
                fakes.ask(i % args.agents, rid)
                await asyncio.wait_for(fakes.event(rid).wait(), DEADLINE_S)
                seen = fakes.seen[rid]
                round_trips.append((seen["t1"] - seen["t0"]) * 1000)
            out["approval"] = round_trips
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

            limits = httpx.Limits(max_connections=args.senders)
            async with httpx.AsyncClient(base_url=args.url, timeout=60, limits=limits) as many:

                async def sender(s: int) -> None:
                    for k in range(args.per_sender):
                        await post(many, sids[s], "z", f"t-{run}-{s}-{k}")

                before, t0 = cpu_s(args.hub_pid), time.perf_counter()
                await asyncio.gather(*(sender(s) for s in range(args.senders)))
                elapsed = time.perf_counter() - t0
            count = args.senders * args.per_sender
            out["throughput_per_s"] = count / elapsed
            out["cpu_per_post_throughput_ms"] = (cpu_s(args.hub_pid) - before) * 1000 / count
            out["errors"] = fakes.errors[:5] + phone.errors[:5]
        finally:
            await fakes.stop()
    return out


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--agents":
        asyncio.run(agents(sys.argv[2], sys.argv[3], sys.argv[4].split(",")))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--hub-pid", type=int, required=True)
    for name in ("agents", "sequential", "deliveries", "senders", "per-sender", "permissions"):
        ap.add_argument(f"--{name}", type=int, required=True)
    emit(asyncio.run(drive(ap.parse_args())))


if __name__ == "__main__":
    main()
