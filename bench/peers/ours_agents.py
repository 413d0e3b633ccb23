"""Our fake agents in a child process, as bench/peers/hapi_driver.py runs HAPI's:
run by bench/peers/hapi.py, not by hand.

Receiving on the same event loop as the poster slowed what the poster measured
(bench/delivery.py does that: its listeners share the poster's process). Here, as
on HAPI's side, the agents live in a process of their own and times cross the
process boundary as time.perf_counter() (CLOCK_MONOTONIC, one clock for the
machine).

The child opens one SSE stream per agent key (`GET /api/v1/agent/events`) and
prints one JSON line per event of interest:
  {"ready": true}                          every stream is open
  {"seen": MAIL_ID, "t": T}                a `new_mail` reached its agent
  {"asked": RELAY, "t0": T0, "t1": T1}     the first agent asked (`POST
      /api/v1/agent/permissions`) at T0 and saw its `permission_decision` at T1
It reads `ask RELAY` lines on stdin (the session is `--session`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import httpx

from mailui4agents.client.sse import SSEParser

DEADLINE_S = 30.0


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def child(url: str, keys: list[str], session: str) -> None:
    opened = 0
    all_open = asyncio.Event()
    asked: dict[str, float] = {}

    async def listen(key: str) -> None:
        nonlocal opened
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        async with (
            httpx.AsyncClient(base_url=url, timeout=None) as c,
            c.stream("GET", "/api/v1/agent/events", headers=headers) as r,
        ):
            assert r.status_code == 200, r.status_code
            opened += 1
            if opened == len(keys):
                all_open.set()
            parser = SSEParser()
            async for chunk in r.aiter_raw():
                now = time.perf_counter()
                for ev in parser.feed(chunk):
                    if ev.event == "new_mail":
                        emit({"seen": json.loads(ev.data)["mail_id"], "t": now})
                    elif ev.event == "permission_decision":
                        relay = json.loads(ev.data).get("relay_key")
                        if relay in asked:
                            emit({"asked": relay, "t0": asked.pop(relay), "t1": now})

    async def ask(http: httpx.AsyncClient, relay: str) -> None:
        asked[relay] = time.perf_counter()
        r = await http.post(
            "/api/v1/agent/permissions",
            json={"session_id": session, "relay_key": relay, "tool_name": "Bash",
                  "tool_input": {"command": "npm test"}},
            headers={"Authorization": f"Bearer {keys[0]}"},
        )  # fmt: skip
        assert r.status_code == 201, r.text

    tasks = [asyncio.create_task(listen(k)) for k in keys]
    await asyncio.wait_for(all_open.wait(), 60)
    emit({"ready": True})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with httpx.AsyncClient(base_url=url, timeout=DEADLINE_S) as http:
        pending: set[asyncio.Task[None]] = set()
        while line := (await reader.readline()).decode().split():
            if line[0] == "ask":
                task = asyncio.create_task(ask(http, line[1]))
                pending.add(task)
                task.add_done_callback(pending.discard)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class Agents:
    """The child process, seen from the poster's side."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.seen: dict[str, dict[str, Any]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self.ready = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def event(self, key: str) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    async def start(self, url: str, keys: list[str], session: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--url", url, "--keys", ",".join(keys),
            "--session", session,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        await asyncio.wait_for(self.ready.wait(), 60)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for raw in self.proc.stdout:
            msg = json.loads(raw)
            if msg.get("ready"):
                self.ready.set()
                continue
            key = msg.get("seen") or msg.get("asked")
            self.seen[key] = msg
            self.event(key).set()

    def ask(self, relay: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"ask {relay}\n".encode())

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--session", required=True)
    args = ap.parse_args()
    asyncio.run(child(args.url, args.keys.split(","), args.session))


if __name__ == "__main__":
    main()
