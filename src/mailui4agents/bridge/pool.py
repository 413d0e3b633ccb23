"""Per-session serial queues over a bounded pool (docs/bridge.md, "Ordering, limits, parking").

One mail session is strictly serial: its next mail starts only when the
previous turn is over. Different sessions run in parallel, at most
``concurrency`` at a time; a full pool queues, never drops. A turn parked on a
human's decision gives its place back while it waits (:meth:`Slot.park`), and
takes it again when the decision arrives — even if that briefly puts the pool
above its limit, since the agent CLI is already running and cannot be paused.
Sessions take turns fairly: a session whose turn ended goes to the back of
the line.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio
from anyio.abc import TaskGroup

logger = logging.getLogger(__name__)

J = TypeVar("J")


@dataclass
class Slot:
    """A running turn's place in the pool."""

    pool: Pool  # type: ignore[type-arg]
    session_id: str
    parked: bool = False

    def park(self) -> None:
        if not self.parked:
            self.parked = True
            self.pool._running -= 1
            self.pool._changed()
            self.pool._fill()

    def unpark(self) -> None:
        if self.parked:
            self.parked = False
            self.pool._running += 1
            self.pool._changed()


@dataclass
class Pool(Generic[J]):
    """Queues of jobs keyed by session, run by ``run(job, slot)``."""

    concurrency: int
    run: Callable[[J, Slot], Awaitable[None]]
    key: Callable[[J], str]  # a job's identity, to drop duplicates
    on_change: Callable[[], None] = lambda: None
    queues: dict[str, deque[J]] = field(default_factory=dict)
    active: dict[str, Slot] = field(default_factory=dict)
    _ready: deque[str] = field(default_factory=deque)
    _known: set[str] = field(default_factory=set)
    _running: int = 0  # active and not parked
    _tasks: TaskGroup | None = None
    idle: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")

    def attach(self, tasks: TaskGroup) -> None:
        """Run jobs in ``tasks`` from now on."""
        self._tasks = tasks
        self._fill()

    def submit(self, session_id: str, job: J) -> bool:
        """Queue ``job`` behind the session's others; False for a duplicate."""
        ident = self.key(job)
        if ident in self._known:
            return False
        self._known.add(ident)
        self.queues.setdefault(session_id, deque()).append(job)
        if session_id not in self.active and session_id not in self._ready:
            self._ready.append(session_id)
        self.idle = anyio.Event() if self.idle.is_set() else self.idle
        self._changed()
        self._fill()
        return True

    @property
    def running(self) -> int:
        """Turns that count toward the limit (not parked)."""
        return self._running

    @property
    def parked(self) -> int:
        return sum(1 for slot in self.active.values() if slot.parked)

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def _changed(self) -> None:
        self.on_change()

    def _fill(self) -> None:
        while self._tasks is not None and self._ready and self._running < self.concurrency:
            session_id = self._ready.popleft()
            queue = self.queues.get(session_id)
            if not queue:
                continue
            job = queue.popleft()
            slot = Slot(self, session_id)
            self.active[session_id] = slot
            self._running += 1
            self._tasks.start_soon(self._turn, job, slot)
        self._check_idle()

    async def _turn(self, job: J, slot: Slot) -> None:
        try:
            await self.run(job, slot)
        except Exception:
            logger.exception("a turn of session %s crashed", slot.session_id)
        finally:
            self._known.discard(self.key(job))
            if not slot.parked:
                self._running -= 1
            del self.active[slot.session_id]
            queue = self.queues.get(slot.session_id)
            if queue:
                self._ready.append(slot.session_id)
            else:
                self.queues.pop(slot.session_id, None)
            self._changed()
            self._fill()

    def _check_idle(self) -> None:
        if not self.active and not self.queued:
            self.idle.set()
