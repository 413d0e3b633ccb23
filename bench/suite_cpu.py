"""CPU time of test files, each in its own pytest process (the machine is shared,
so wall time is noisy; user+sys CPU moves far less with load).

    .venv/bin/python bench/suite_cpu.py tests/api/test_strict_input.py tests/api/test_security.py

Prints per file: user+sys CPU seconds of pytest and the processes it waited for,
wall seconds, the outcome line, and the load average before and after. The
PostgreSQL server the tests start runs detached (pg_ctl), so its CPU is not in
the figure: the figure is the test process's own work (set-up, requests, checks).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time


def run(path: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in out.stdout.splitlines() if " passed" in ln or " failed" in ln]
    return cpu, wall, lines[-1] if lines else f"exit {out.returncode}"


def main(paths: list[str]) -> None:
    print(f"load average at start: {os.getloadavg()}")
    total = 0.0
    for path in paths:
        cpu, wall, outcome = run(path)
        total += cpu
        print(f"{path}: cpu {cpu:.1f} s, wall {wall:.1f} s, {outcome}", flush=True)
    print(f"total cpu {total:.1f} s; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main(sys.argv[1:])
