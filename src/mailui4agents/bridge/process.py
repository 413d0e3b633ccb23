"""Run one turn's process: hard timeout, process-group kill, settle regardless.

The CLI runs in its own session (process group). The turn timeout counts only
time not parked on a human. On expiry — or when the bridge shuts down — the
whole group gets SIGTERM, then SIGKILL after a grace period, and after a
further settle period the turn is given up *regardless*: a child that neither
exits nor closes its output must not hang the session's queue forever.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from mailui4agents.bridge.park import ParkState
from mailui4agents.bridge.runners.base import Launch, StreamParser, TurnEvent

logger = logging.getLogger(__name__)

TERM_GRACE_S = 3.0
SETTLE_S = 3.0
# After the CLI exits, how long its leftover children may keep stdout open.
DRAIN_S = 2.0
MAX_LINE_BYTES = 4 * 1024 * 1024
STDERR_TAIL_LINES = 40


@dataclass
class ProcessResult:
    """How the process ended, and what it said."""

    events: list[TurnEvent] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    stderr_tail: str = ""
    spawn_error: str | None = None
    spawned_at: float | None = None  # wall clock, for the bridge's timing log


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), to
    tell a leftover process group from a new one that reuses its number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def kill_leftover(pgid: int, ticks: int | None) -> bool:
    """SIGKILL the group ``pgid`` if its leader is still the process we started."""
    if ticks is None or start_ticks(pgid) != ticks:
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def run_process(
    launch: Launch,
    cwd: Path,
    parser: StreamParser,
    *,
    timeout_s: float,
    park: ParkState,
    on_event: Callable[[TurnEvent], None] = lambda _e: None,
    on_spawn: Callable[[int], None] = lambda _pid: None,
) -> ProcessResult:
    """Run ``launch`` in ``cwd`` to its end, the timeout, or cancellation."""
    result = ProcessResult()
    env = {**launch.env, "PWD": str(cwd)}  # some CLIs work in $PWD, not in their cwd
    try:
        process = await anyio.open_process(
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        result.spawn_error = f"{launch.argv[0]}: {exc.strerror or exc}"
        return result
    pgid = process.pid
    result.spawned_at = time.time()
    on_spawn(pgid)
    stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    def emit(events: list[TurnEvent]) -> None:
        for event in events:
            result.events.append(event)
            on_event(event)

    readers_left = 2
    readers_done = anyio.Event()

    async def read(stream: ByteReceiveStream | None, handle: Callable[[str], None]) -> None:
        nonlocal readers_left
        try:
            if stream is not None:
                async for line in _lines(stream):
                    handle(line)
        finally:
            readers_left -= 1
            if not readers_left:
                readers_done.set()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read, process.stdout, lambda line: emit(parser.feed(line)))
            tasks.start_soon(read, process.stderr, stderr_tail.append)
            tasks.start_soon(_feed_stdin, process, launch.stdin)
            if not await _wait_or_timeout(process, timeout_s, park):
                result.timed_out = True
                await _stop_group(process, pgid)
            # The CLI is gone. A leftover child that still holds stdout open is an
            # orphan of the turn: it gets a moment, then the whole group is killed.
            with anyio.move_on_after(DRAIN_S):
                await readers_done.wait()
            _signal_group(pgid, signal.SIGKILL)
            with anyio.move_on_after(DRAIN_S):
                await readers_done.wait()
            tasks.cancel_scope.cancel()
    except BaseException:
        # Shutdown or an error: stop the turn, never leave it running (shielded).
        with anyio.CancelScope(shield=True):
            await _stop_group(process, pgid)
        raise
    finally:
        await _close(process)
    result.returncode = process.returncode
    result.stderr_tail = "\n".join(stderr_tail)
    if not result.timed_out:
        emit(parser.finish())
    return result


async def _feed_stdin(process: Process, data: bytes) -> None:
    assert process.stdin is not None
    try:
        if data:
            await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the CLI does not read its stdin: fine
    finally:
        await process.stdin.aclose()


async def _wait_or_timeout(process: Process, timeout_s: float, park: ParkState) -> bool:
    """True when the process exited; False when the unparked time ran out."""
    used = 0.0
    exited = anyio.Event()

    async def wait_exit() -> None:
        await process.wait()
        exited.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait_exit)
        while not exited.is_set():
            changed = park.changed
            if park.parked:
                await _first(exited.wait, changed.wait)
                continue
            started = anyio.current_time()
            with anyio.move_on_after(max(timeout_s - used, 0.0)) as scope:
                await _first(exited.wait, changed.wait)
            used += anyio.current_time() - started
            if scope.cancelled_caught and not exited.is_set():
                tasks.cancel_scope.cancel()
                return False
    return True


async def _first(*waiters: Callable[[], object]) -> None:
    """Return as soon as any of the awaitable factories completes."""
    async with anyio.create_task_group() as tasks:

        async def run(waiter: Callable[[], object]) -> None:
            await waiter()  # type: ignore[misc]
            tasks.cancel_scope.cancel()

        for waiter in waiters:
            tasks.start_soon(run, waiter)


async def _stop_group(process: Process, pgid: int) -> None:
    """SIGTERM the group, SIGKILL after the grace, then settle regardless."""
    if process.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(TERM_GRACE_S):
            await process.wait()
    _signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(SETTLE_S):
        await process.wait()
    if process.returncode is None:
        logger.error("turn process %s did not exit after SIGKILL; giving it up", pgid)


async def _close(process: Process) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE_S):
        await process.aclose()


async def _lines(stream: ByteReceiveStream) -> AsyncIterator[str]:
    """Decoded lines without their newline; an endless line is cut at MAX_LINE_BYTES."""
    buffer = b""
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            break
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            yield buffer[:cut].decode("utf-8", "replace").rstrip("\r")
            buffer = buffer[cut + 1 :]
        if len(buffer) > MAX_LINE_BYTES:
            yield buffer[:MAX_LINE_BYTES].decode("utf-8", "replace")
            buffer = b""
    if buffer:
        yield buffer.decode("utf-8", "replace")
