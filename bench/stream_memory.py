"""What one held SSE stream allocates, by source line (tracemalloc).

Runs the gateway in this process (uvicorn, real sockets) so tracemalloc sees
it, holds `--streams` streams from one child process (bench/streams.py
--hold), and prints the traced bytes per stream grouped by file and by line,
beside this process's RSS delta (which tracemalloc itself inflates: use
bench/streams.py for RSS). Not a test.

Usage: .venv/bin/python bench/stream_memory.py [--streams 500] [--frames 1] [--top 30]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path

import httpx
import uvicorn

from calibrate import machine
from mailui4agents.app import create_app
from mailui4agents.http_protocol import LOOP, with_header_limits
from mailui4agents.settings import Settings
from mailui4agents.testing import FAST_HASH_ENV

ADMIN_PASSWORD = "bench-admin-password"
STREAMS = str(Path(__file__).with_name("streams.py"))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def hold(url: str, keys: list[str]) -> asyncio.subprocess.Process:
    child = await asyncio.create_subprocess_exec(
        sys.executable, STREAMS, "--hold", url, json.dumps(keys), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 600)
    assert line.strip() == b"ready", line
    return child


async def run(args: argparse.Namespace) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, args.streams + 500), hard), hard))
    os.environ.update(FAST_HASH_ENV)
    settings = Settings.from_env(data_dir=Path(tempfile.mkdtemp()) / "data", database_url=None)
    settings = settings.model_copy(update={"admin_password": ADMIN_PASSWORD})
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=0, log_level="warning",
        loop=LOOP, http=with_header_limits(settings.header_timeout_s),
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)  # uvicorn has no started event; poll with the task alive
        assert not task.done()
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        admin = {"Authorization": f"Bearer {r.json()['token']}"}
        keys = []
        for i in range(50):
            a = await http.post("/api/v1/admin/agents", json={"name": f"agent{i}"}, headers=admin)
            keys.append(a.json()["key"])
    held = [keys[i % len(keys)] for i in range(args.streams)]
    warm = await hold(url, held[:20])  # first-use allocations are not per stream
    warm.terminate()
    await warm.wait()
    gc.collect()
    tracemalloc.start(args.frames)
    before_rss, before = rss_mb(), tracemalloc.take_snapshot()
    child = await hold(url, held)
    gc.collect()
    after, after_rss = tracemalloc.take_snapshot(), rss_mb()
    n = args.streams
    diff = after.compare_to(before, "lineno" if args.frames == 1 else "traceback")
    print(machine())
    print(f"{n} streams: traced {sum(d.size_diff for d in diff) / n / 1024:.1f} KB per stream; "
          f"RSS {before_rss:.0f} -> {after_rss:.0f} MB (inflated by tracemalloc)")  # fmt: skip
    for d in after.compare_to(before, "filename")[: args.top]:
        print(f"file {d.size_diff / n:7.0f} B {d.count_diff / n:5.1f} blocks  {d.traceback}")
    for d in diff[: args.top]:
        where = "\n      ".join(d.traceback.format()) if args.frames > 1 else str(d.traceback)
        print(f"line {d.size_diff / n:7.0f} B {d.count_diff / n:5.1f} blocks  {where}")
    tracemalloc.stop()
    child.terminate()
    await child.wait()
    server.should_exit = True
    await task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--frames", type=int, default=1)
    ap.add_argument("--top", type=int, default=30)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
