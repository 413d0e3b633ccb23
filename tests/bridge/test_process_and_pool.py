"""The turn process (timeouts, process groups, parking) and the pool, with real
subprocesses and real tasks."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from mailui4agents.bridge.park import ParkServer, ParkState
from mailui4agents.bridge.pool import Pool, Slot
from mailui4agents.bridge.process import run_process, start_ticks
from mailui4agents.bridge.runners.base import Launch, TurnEvent
from mailui4agents.bridge.runners.command import CommandParser
from mailui4agents.hooks.parking import parked
from tests.bridge.harness import dead

pytestmark = pytest.mark.anyio

STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"])
print(os.getpid(), child.pid, flush=True)
time.sleep(1000)
"""


def launch(code: str, stdin: bytes = b"") -> Launch:
    return Launch([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, stdin)


async def test_a_turn_that_ignores_sigterm_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        result = await run_process(
            launch(STUBBORN), tmp_path, CommandParser(), timeout_s=0.5, park=ParkState()
        )
    assert result.timed_out
    assert result.events == []  # a timed-out turn gives no answer
    assert result.returncode is not None and result.returncode < 0


async def test_the_group_is_gone_after_a_timeout(tmp_path: Path) -> None:
    seen: list[int] = []

    class Counting(CommandParser):
        def feed(self, line: str) -> list[TurnEvent]:
            seen.extend(int(p) for p in line.split())
            return super().feed(line)

    parser = Counting()
    with anyio.fail_after(30):
        result = await run_process(
            launch(STUBBORN), tmp_path, parser, timeout_s=1.0, park=ParkState()
        )
    assert result.timed_out and len(seen) == 2
    assert await dead(seen[0]) and await dead(seen[1])


async def test_plain_output_stdin_and_cwd(tmp_path: Path) -> None:
    code = "import os, sys; print(sys.stdin.read().upper()); print(os.getcwd(), os.environ['PWD'])"
    result = await run_process(
        launch(code, b"hello"), tmp_path, CommandParser(), timeout_s=30, park=ParkState()
    )
    assert result.returncode == 0 and not result.timed_out
    text = result.events[-1].text  # type: ignore[union-attr]
    assert text == f"HELLO\n{tmp_path} {tmp_path}"


async def test_a_leftover_child_holding_stdout_does_not_hang_the_turn(tmp_path: Path) -> None:
    code = "import subprocess; subprocess.Popen(['sleep', '1000']); print('done')"
    with anyio.fail_after(20):
        result = await run_process(
            launch(code), tmp_path, CommandParser(), timeout_s=60, park=ParkState()
        )
    assert result.returncode == 0 and not result.timed_out


async def test_a_missing_program_is_a_spawn_error(tmp_path: Path) -> None:
    missing = Launch(["/no/such/agent-cli"], {}, b"")
    result = await run_process(missing, tmp_path, CommandParser(), timeout_s=5, park=ParkState())
    assert result.spawn_error is not None and "agent-cli" in result.spawn_error


async def test_the_turn_clock_stops_while_a_hook_is_parked(tmp_path: Path) -> None:
    """A 1 s timeout, a 2 s job: parked for the whole job, it is not killed."""
    park = ParkState()
    park.enter("req-1")
    code = "import time; time.sleep(2); print('ok')"
    with anyio.fail_after(20):
        result = await run_process(launch(code), tmp_path, CommandParser(), timeout_s=1, park=park)
    assert not result.timed_out and result.returncode == 0
    park.leave()
    with anyio.fail_after(20):
        result = await run_process(
            launch(code), tmp_path, CommandParser(), timeout_s=1, park=ParkState()
        )
    assert result.timed_out  # the negative control: unparked, the same job times out


async def test_cancelling_a_turn_stops_its_group(tmp_path: Path) -> None:
    seen: list[int] = []
    with anyio.move_on_after(1.5):
        await run_process(
            launch(STUBBORN), tmp_path, CommandParser(), timeout_s=600, park=ParkState(),
            on_spawn=seen.append,
        )  # fmt: skip
    assert seen and await dead(seen[0])


def test_start_ticks_tell_processes_apart() -> None:
    import os

    assert start_ticks(os.getpid()) is not None
    assert start_ticks(2**22 + 12345) is None


async def test_the_park_socket_parks_a_turn_while_the_hook_waits() -> None:
    server = ParkServer()
    changes: list[bool] = []
    state = ParkState(on_change=lambda s: changes.append(s.parked))
    env = {"AGENTMAIL_BRIDGE_SOCKET": str(server.path), "AGENTMAIL_BRIDGE_TURN": "tok"}
    try:
        async with anyio.create_task_group() as tasks:
            await server.serve(tasks)
            server.turns["tok"] = state
            with anyio.fail_after(10):
                with parked(
                    env, "req-9"
                ):  # blocking (the hook's), but connect + send return at once
                    await state.changed.wait() if not state.parked else None
                    assert state.parked and state.request_id == "req-9"
                while state.parked:
                    await state.changed.wait()
            # An unknown token parks nothing; a missing socket is harmless.
            with parked({**env, "AGENTMAIL_BRIDGE_TURN": "other"}, "r"):
                pass
            with parked({"AGENTMAIL_BRIDGE_SOCKET": "/no/such.sock",
                               "AGENTMAIL_BRIDGE_TURN": "tok"}, "r"):  # fmt: skip
                pass
            tasks.cancel_scope.cancel()
    finally:
        server.close()
    assert changes == [True, False]


async def test_the_pool_keeps_sessions_serial_limits_parallelism_and_drops_duplicates() -> None:
    running = peak = 0
    log: list[tuple[str, str]] = []
    gate = anyio.Event()

    async def run(job: tuple[str, str], slot: Slot) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        log.append(job)
        await gate.wait()
        await anyio.sleep(0.01)
        running -= 1

    pool: Pool[tuple[str, str]] = Pool(2, run, key=lambda j: j[1])
    async with anyio.create_task_group() as tasks:
        pool.attach(tasks)
        for n in range(3):
            for s in "abc":
                assert pool.submit(s, (s, f"{s}{n}"))
        assert not pool.submit("a", ("a", "a0"))  # a duplicate is dropped
        await anyio.wait_all_tasks_blocked()
        assert pool.running == 2 and pool.queued == 7
        gate.set()
        with anyio.fail_after(10):
            await pool.idle.wait()
    assert peak == 2 and len(log) == 9
    for s in "abc":
        assert [j for _, j in log if j.startswith(s)] == [f"{s}0", f"{s}1", f"{s}2"]


async def test_a_parked_slot_lets_another_session_run() -> None:
    started: list[str] = []
    release, b_started = anyio.Event(), anyio.Event()

    async def run(job: str, slot: Slot) -> None:
        started.append(job)
        if job == "b":
            b_started.set()
        if job == "a":
            slot.park()
            await release.wait()
            slot.unpark()

    pool: Pool[str] = Pool(1, run, key=lambda j: j)
    async with anyio.create_task_group() as tasks:
        pool.attach(tasks)
        pool.submit("A", "a")
        pool.submit("B", "b")
        with anyio.fail_after(5):
            await b_started.wait()
        assert pool.parked == 1
        release.set()
        with anyio.fail_after(5):
            await pool.idle.wait()
    assert started == ["a", "b"] and pool.running == 0
