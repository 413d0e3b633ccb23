"""The hook's fast path: spawn → exit of `agentmail hook claude-code` for a Read
call (decided without the gateway), wall and CPU time, against `python -c pass`
in the same run; and the modules it imports (`python -X importtime`).

CPU time (user + system of the child) moves much less with the machine's load
than wall time, so both are printed. Target: ≤ 3 × `python -c pass`.

Usage: .venv/bin/python bench/hook.py [--runs 40] [--agentmail PATH]
(default: the `agentmail` console script beside this Python).
Prints its figures and the machine conditions; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from calibrate import bytecode, load, machine, python_pass, spawn, sqlite_commit_rate
from stats import pct, summary

READ = {
    "session_id": "bench", "transcript_path": "/tmp/bench.jsonl", "cwd": "/srv/bench",
    "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Read",
    "tool_input": {"file_path": "/srv/bench/a.py"}, "tool_use_id": "toolu_bench",
}  # fmt: skip


def imported(argv: list[str], stdin: bytes) -> int:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv[1:]] if argv[0] == sys.executable else argv,
        input=stdin, capture_output=True, check=True,
    )  # fmt: skip
    return sum(1 for line in done.stderr.decode().splitlines() if line.startswith("import time:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--agentmail", default=str(Path(sys.executable).with_name("agentmail")))
    args = ap.parse_args()
    bytecode()
    print(machine(), flush=True)
    stdin = json.dumps(READ).encode()
    rate = sqlite_commit_rate()
    floor, hook, floor2 = [], [], []
    for _ in range(args.runs):  # interleaved, so both see the same load
        floor.append(python_pass(1))
        hook.append(spawn([args.agentmail, "hook", "claude-code"], 1, stdin))
        floor2.append(spawn([sys.executable, "-m", "mailui4agents.cli.main", "hook",
                             "claude-code"], 1, stdin))  # fmt: skip
    pass_wall = [x.wall_ms[0] for x in floor]
    pass_cpu = [x.cpu_ms[0] for x in floor]
    print(f"calibration: raw SQLite commit rate (WAL, synchronous=FULL) {rate:.0f} commits/s")
    print(summary("calibration: `python -c pass` wall", pass_wall))
    print(summary("calibration: `python -c pass` CPU", pass_cpu))
    labels = ("agentmail hook claude-code (Read)", "python -m mailui4agents.cli.main hook (Read)")
    for label, runs in zip(labels, (hook, floor2), strict=True):
        wall = [x.wall_ms[0] for x in runs]
        cpu = [x.cpu_ms[0] for x in runs]
        print(summary(f"{label}, wall", wall),
              f"| {pct(wall, 50) / pct(pass_wall, 50):.2f} x python -c pass (p50)")  # fmt: skip
        print(summary(f"{label}, CPU", cpu),
              f"| {pct(cpu, 50) / pct(pass_cpu, 50):.2f} x python -c pass (p50)")  # fmt: skip
    modules = imported([sys.executable, "-m", "mailui4agents.cli.main", "hook", "claude-code"],
                       stdin)  # fmt: skip
    print(f"modules imported by the hook (-X importtime): {modules}; "
          f"by python -c pass: {imported([sys.executable, '-c', 'pass'], b'')}")  # fmt: skip
    print(f"loadavg at the end: {load()}")


if __name__ == "__main__":
    main()
