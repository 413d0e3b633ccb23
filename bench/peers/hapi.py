"""HAPI's hub and our gateway side by side, in one run, one table (bench/peers/README.md).

Installs HAPI (npm `@twsxtd/hapi`, pinned below) into a cache folder, starts its hub
on 127.0.0.1 with its relay and pushes off — in a network namespace of its own when
this runs as root, so that nothing can leave the machine — and drives it with
bench/peers/hapi_driver.py (its own virtualenv: httpx and python-socketio, pinned in
constraints.txt). Then it measures our gateway on the same four paths with the same
sample sizes (bench/delivery.py's and bench/approval.py's code), and prints both.

Paths (ms, p50 and p99):
  bare GET        an authenticated GET of one session (HAPI) / one bare GET (ours)
  post            one message/mail at a time, the poster's latency
  post -> agent   posted until the addressed agent's connection has it, N agents
                  connected (HAPI: socket.io `update`; ours: the agent's SSE stream)
  throughput      S concurrent posters, P posts each
  CPU per post    the server process's user+system CPU over the sequential posts
  approval        agent asks -> a watching human approves on sight -> the agent
                  has the answer (no process start on either side)

Usage: .venv/bin/python bench/peers/hapi.py [--agents 50] [--sequential 1000]
       [--deliveries 1000] [--senders 8] [--per-sender 250] [--permissions 1000]
       [--cache DIR] [--only hapi|ours]
It is a bench, not a test: it prints figures and the machine's load. The samples
were 200 before the third round (bench/README.md): runs of one commit then
differed by up to 1.4 ms (post -> agent) and 2.3 ms (approval) at the p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import approval  # noqa: E402  (bench/ is put on the path just above)
import delivery  # noqa: E402
from calibrate import bare_get_ms, cpu_s, load, machine  # noqa: E402
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env  # noqa: E402
from peers import ours_agents  # noqa: E402
from stats import pct  # noqa: E402

HAPI_VERSION = "0.30.7"
DRIVER_PACKAGES = ["httpx", "python-socketio", "aiohttp"]
TOKEN = "bench-cli-token-0123456789abcdef"  # HAPI's one shared secret, for this run only


def run(cmd: list[str], **kw: Any) -> None:
    subprocess.run(cmd, check=True, **kw)


def install_hapi(cache: Path) -> Path:
    """The hub binary, installed once per version (npm: a stub plus the platform's
    prebuilt package, which the registry ships)."""
    prefix = cache / "hapi" / HAPI_VERSION
    binary = prefix / "node_modules" / "@twsxtd" / "hapi-linux-x64" / "bin" / "hapi"
    if not binary.exists():
        print(f"installing @twsxtd/hapi@{HAPI_VERSION} into {prefix}", file=sys.stderr)
        prefix.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=error", f"@twsxtd/hapi@{HAPI_VERSION}"])  # fmt: skip
    if not binary.exists():
        sys.exit(f"no hub binary at {binary}: HAPI ships one for linux-x64 only")
    return binary


def install_driver(cache: Path) -> Path:
    """The driver's Python, with versions from constraints.txt."""
    venv = cache / "hapi" / "driver-venv"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    pins = (REPO / "constraints.txt").read_bytes()
    if stamp.exists() and stamp.read_bytes() == pins:
        return python
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(REPO / "constraints.txt"), *DRIVER_PACKAGES])  # fmt: skip
    stamp.write_bytes(pins)
    return python


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def isolated() -> bool:
    """A network namespace of the hub's own: root and unshare/nsenter/ip at hand."""
    return os.geteuid() == 0 and all(shutil.which(c) for c in ("unshare", "nsenter", "ip"))


def wait_for_own_namespace(hub: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    """Until the hub's process is in a network namespace other than ours.
    `unshare -n` makes it after it starts: an nsenter before that joined our own
    namespace, where no hub listens (the first run after each install failed so:
    "the hub did not answer /health within 60 s"; bench/README.md, fourth round)."""
    ours = os.readlink("/proc/self/ns/net")
    end = time.monotonic() + deadline_s
    while os.readlink(f"/proc/{hub.pid}/ns/net") == ours:
        if hub.poll() is not None or time.monotonic() > end:
            sys.exit(f"the hub's network namespace was not made (exit code {hub.poll()})")
        time.sleep(0.01)


def measure_hapi(args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    binary, python = install_hapi(cache), install_driver(cache)
    port = 39517 if isolated() else free_port()
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": "/usr/bin:/bin", "HOME": home, "HAPI_HOME": f"{home}/hapi",
            "CLI_API_TOKEN": TOKEN, "HAPI_LISTEN_HOST": "127.0.0.1",
            "HAPI_LISTEN_PORT": str(port), "HAPI_IOS_PUSH": "off", "HAPI_ANDROID_PUSH": "off",
            "TELEGRAM_NOTIFICATION": "false", "SERVERCHAN_NOTIFICATION": "false",
        }  # fmt: skip
        hub_cmd = [str(binary), "hub", "--no-relay", "--host", "127.0.0.1", "--port", str(port)]
        if isolated():
            # `exec` keeps one PID from unshare to the hub: its CPU is read by that PID.
            hub_cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                       *hub_cmd]  # fmt: skip
        else:
            print("warning: not root: the hub runs on the host's loopback", file=sys.stderr)
        log = open(Path(home) / "hub.log", "wb")  # noqa: SIM115  (closed below)
        hub = subprocess.Popen(hub_cmd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            driver = [str(python), str(Path(__file__).with_name("hapi_driver.py")),
                      "--url", f"http://127.0.0.1:{port}", "--token", TOKEN,
                      "--hub-pid", str(hub.pid)]  # fmt: skip
            for name in ("agents", "sequential", "deliveries", "senders", "per_sender",
                         "permissions"):  # fmt: skip
                driver += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
            if isolated():
                wait_for_own_namespace(hub)
                driver = ["nsenter", "-t", str(hub.pid), "-n", *driver]
            done = subprocess.run(driver, stdout=subprocess.PIPE, timeout=900, check=False)
            if done.returncode != 0:
                tail = (Path(home) / "hub.log").read_text(errors="replace")[-2000:]
                sys.exit(f"the HAPI driver failed ({done.returncode}); hub log:\n{tail}")
            out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
            out["rss_kib"] = int(Path(f"/proc/{hub.pid}/status").read_text().split("VmRSS:")[1]
                                 .split()[0])  # fmt: skip
        finally:
            hub.terminate()
            try:
                hub.wait(15)
            except subprocess.TimeoutExpired:
                hub.kill()
                hub.wait()
            log.close()
    return out


async def measure_ours(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(
            data_dir=Path(tmp) / "data",
            env=clean_env(
                AGENTMAIL_ADMIN_PASSWORD=delivery.ADMIN_PASSWORD,
                AGENTMAIL_SESSION_RATE_LIMIT="100000",  # 50 new sessions a minute
                **FAST_HASH_ENV,
            ),
        )
        gw.start(timeout=180)
        try:
            assert gw.proc is not None
            pid = gw.proc.pid
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
                ana, keys = await delivery.setup(http, max(args.agents, args.senders))
                out["bare_get"] = await bare_get_ms(http, ana)
                before = cpu_s(pid)
                out["sequential"] = await delivery.sequential(http, ana, args.sequential)
                out["cpu_per_post_ms"] = (cpu_s(pid) - before) * 1000 / args.sequential
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
                # approval.setup's admin steps, on this gateway's own users
                r = await http.post(
                    "/api/v1/mail",
                    json={"to": ["agent0@/srv/approve.new"], "subject": "bench",
                          "body": "go", "permission_mode": "workspace"},
                    headers={"Authorization": f"Bearer {ana}"},
                )  # fmt: skip
                assert r.status_code == 201, r.text
                session = r.json()["session_id"]
                if args.in_process_agents:  # bench/delivery.py's and approval.py's way
                    out["post_to_agent"] = await delivery.delivery(
                        gw.url, ana, keys[: args.agents], args.deliveries
                    )
                    out["approval"] = await approval.agent_round_trips(
                        http, ana, keys[0], session, args.permissions
                    )
                else:
                    out.update(await child_agents(http, gw.url, ana, keys, session, args))
            before = cpu_s(pid)
            count, elapsed = await delivery.throughput(gw.url, ana, args.senders, args.per_sender)
            out["throughput_per_s"] = count / elapsed
            out["cpu_per_post_throughput_ms"] = (cpu_s(pid) - before) * 1000 / count
        finally:
            gw.stop()
    return out


async def child_agents(
    http: httpx.AsyncClient,
    url: str,
    ana: str,
    keys: list[str],
    session: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """post -> agent and approval with the agents in a child process
    (bench/peers/ours_agents.py), as HAPI's driver runs its agents."""
    out: dict[str, Any] = {}
    fakes = ours_agents.Agents()
    await fakes.start(url, keys[: args.agents], session)
    try:
        headers = {"Authorization": f"Bearer {ana}"}
        delivered = []
        for i in range(args.deliveries):
            t0 = time.perf_counter()
            r = await http.post(
                "/api/v1/mail",
                json={"to": [f"agent{i % args.agents}@/srv/bench"], "subject": f"d {i}",
                      "body": "y" * 200},
                headers=headers,
            )  # fmt: skip
            assert r.status_code == 201, r.text
            mail_id = r.json()["id"]
            await asyncio.wait_for(fakes.event(mail_id).wait(), 30)
            delivered.append((fakes.seen[mail_id]["t"] - t0) * 1000)
        out["post_to_agent"] = delivered
        human = approval.Human(http, ana)
        watching = asyncio.create_task(human.watch())
        await asyncio.wait_for(human.opened.wait(), 30)
        trips = []
        for i in range(args.permissions):
            relay = f"bench-{i}"
            fakes.ask(relay)
            await asyncio.wait_for(fakes.event(relay).wait(), 30)
            seen = fakes.seen[relay]
            trips.append((seen["t1"] - seen["t0"]) * 1000)
        out["approval"] = trips
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
    finally:
        await fakes.stop()
    return out


def cell(samples: list[float] | None) -> str:
    if not samples:
        return "–"
    return f"{pct(samples, 50):.2f} ({pct(samples, 99):.2f})"


def table(hapi: dict[str, Any], ours: dict[str, Any], args: argparse.Namespace) -> list[str]:
    rows = [
        ("bare authenticated GET", "bare_get", cell),
        ("post, one at a time", "sequential", cell),
        (f"post -> agent, {args.agents} agents connected", "post_to_agent", cell),
        ("approval round trip, no process start", "approval", cell),
    ]
    lines = [f"| p50 (p99), ms | HAPI {HAPI_VERSION} | ours | ours / HAPI (p50) |",
             "| --- | --- | --- | --- |"]  # fmt: skip
    for label, key, show in rows:
        a, b = hapi.get(key), ours.get(key)
        ratio = f"{pct(b, 50) / pct(a, 50):.2f}" if a and b else "–"
        lines.append(f"| {label} | {show(a)} | {show(b)} | {ratio} |")
    for label, key, form in (
        (f"{args.senders} concurrent posters", "throughput_per_s", "{:.0f}/s"),
        ("server CPU per post, sequential", "cpu_per_post_ms", "{:.2f} ms"),
        (f"server CPU per post, {args.senders} posters", "cpu_per_post_throughput_ms", "{:.2f} ms"),
    ):
        a, b = hapi.get(key), ours.get(key)
        ratio = f"{b / a:.2f}" if a and b else "–"
        shown = ["–" if v is None else form.format(v) for v in (a, b)]
        lines.append(f"| {label} | {shown[0]} | {shown[1]} | {ratio} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--sequential", type=int, default=1000)
    ap.add_argument("--deliveries", type=int, default=1000)
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--per-sender", type=int, default=250)
    ap.add_argument("--permissions", type=int, default=1000)
    ap.add_argument("--cache", type=Path, default=REPO / ".cache" / "peers")
    ap.add_argument("--only", choices=["hapi", "ours"], default=None)
    ap.add_argument(
        "--in-process-agents", action="store_true",
        help="ours: the agents' streams in the poster's process (bench/delivery.py's "
        "way; HAPI's agents are always in a child process)",
    )  # fmt: skip
    args = ap.parse_args()
    print(machine(), flush=True)
    hapi: dict[str, Any] = {}
    ours: dict[str, Any] = {}
    spans = []
    if args.only != "ours":
        t0, l0 = time.strftime("%H:%M:%S"), load()
        hapi = measure_hapi(args, args.cache)
        spans.append(f"HAPI {t0}-{time.strftime('%H:%M:%S')} UTC, load {l0} -> {load()}")
    if args.only != "hapi":
        t0, l0 = time.strftime("%H:%M:%S"), load()
        ours = asyncio.run(measure_ours(args))
        spans.append(f"ours {t0}-{time.strftime('%H:%M:%S')} UTC, load {l0} -> {load()}")
    print(*table(hapi, ours, args), sep="\n")
    print(*spans, sep="\n")
    print(
        f"samples, each side: {args.sequential} posts, {args.deliveries} deliveries, "
        f"{args.senders}x{args.per_sender} concurrent posts, {args.permissions} approvals"
    )
    if hapi:
        print(f"HAPI hub RSS at the end: {hapi['rss_kib'] / 1024:.0f} MiB; "
              f"driver errors: {hapi.get('errors') or 'none'}")  # fmt: skip


if __name__ == "__main__":
    main()
