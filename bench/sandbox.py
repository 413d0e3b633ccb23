"""What the turn sandbox adds to a turn's start (docs/sandbox.md, "Cost").

For each of N turns (workspace mode, a fresh turn folder each), the two ways the
bridge can start a turn (bridge/turn.py ``_run``), through the bridge's own
``run_process``, with a trivial CLI that notes the time its first instruction ran:

- plain: spawn the CLI → CLI started;
- sandboxed: ``Sandbox.box`` + spawn bwrap → launcher → Landlock → the turn's
  canaries (the launcher proves the boundary itself, ``Sandbox.turn_check``) →
  exec the CLI → CLI started; the report is then judged (``Sandbox.settle``).

The separate probe the bridge runs at start (and before a turn while the
sandbox is not proven) is timed too, on its own.

The cost is sandboxed − plain, per turn, taken in alternation so both see the
same load. Target: p50 ≤ 50 ms.

Usage: .venv/bin/python bench/sandbox.py [--turns 50]
Prints its figures and the machine conditions; it is not a test.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio

from calibrate import machine  # bench/: on sys.path
from mailui4agents.bridge.park import ParkState
from mailui4agents.bridge.process import run_process
from mailui4agents.bridge.runners.base import Launch
from mailui4agents.bridge.runners.command import CommandParser
from mailui4agents.bridge.sandbox import Sandbox
from stats import summary

# The CLI's first instruction notes the wall clock (ns); then it answers.
CLI = "import sys, time; print(time.time_ns()); sys.stdin.read()"


async def started_after(launch: Launch, cwd: Path, t0: float) -> float:
    """Milliseconds from ``t0`` (time.time) until the CLI's first instruction ran."""
    result = await run_process(launch, cwd, CommandParser(), timeout_s=60, park=ParkState())
    if result.returncode != 0:
        raise SystemExit(f"the CLI failed: {result.stderr_tail}")
    text = "".join(getattr(e, "text", "") for e in result.events).split()
    return (int(text[0]) / 1e9 - t0) * 1000


async def main(turns: int) -> None:
    sandbox = Sandbox()
    why = sandbox.unavailable()
    if why is not None:
        raise SystemExit(why)
    root = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        workspace = root / "workspace"
        workspace.mkdir()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "AGENTMAIL_URL": "http://127.0.0.1:1"}
        argv = [sys.executable, "-I", "-S", "-c", CLI]
        plain: list[float] = []
        boxed: list[float] = []
        probes: list[float] = []
        for n in range(turns + 3):  # the first three warm the page cache, not counted
            turn_dir = root / "state" / "turns" / f"t{n}"
            turn_dir.mkdir(parents=True)
            t0 = time.time()
            p = await started_after(Launch(argv, env, b"prompt"), workspace, t0)
            box = sandbox.box("workspace", workspace, turn_dir, [], env)
            proof = await sandbox.prove(box)  # the separate probe, timed on its own
            if not proof.ok:
                raise SystemExit(f"not proven: {proof.reason}")
            t0 = time.time()
            box = sandbox.box("workspace", workspace, turn_dir, [], env)
            box.tmp_dir.mkdir(exist_ok=True)
            check = sandbox.turn_check(box)
            assert check is not None
            wrapped = Launch(sandbox.wrap(box, argv, check), env, b"prompt")
            b = await started_after(wrapped, workspace, t0)
            if not sandbox.settle(check, ran=True).ok:
                raise SystemExit(f"the turn's own proof failed: {sandbox.status.reason}")
            shutil.rmtree(turn_dir)
            if n >= 3:
                plain.append(p)
                boxed.append(b)
                probes.append(proof.seconds * 1000)
        print(machine())
        print(summary("plain start (spawn → CLI runs)", plain))
        print(summary("sandboxed start (bwrap + Landlock + canaries → CLI runs)", boxed))
        print(summary("the separate probe (at start, or while unproven)", probes))
        print(summary("cost the sandbox adds (sandboxed − plain)",
                      [b - p for b, p in zip(boxed, plain, strict=True)]))  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    anyio.run(main, args.turns)
