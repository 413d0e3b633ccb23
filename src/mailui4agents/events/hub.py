"""In-process wake-ups for open streams. The log is the truth; the hub only says
"look again". A missed wake-up costs latency, never an event."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class EventHub:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)

    @contextmanager
    def subscribe(self, principal: str) -> Iterator[asyncio.Event]:
        """An asyncio.Event set whenever `principal` may have new events."""
        ev = asyncio.Event()
        self._waiters[principal].add(ev)
        try:
            yield ev
        finally:
            waiters = self._waiters.get(principal)
            if waiters is not None:
                waiters.discard(ev)
                if not waiters:
                    del self._waiters[principal]

    def notify(self, principals: Iterable[str]) -> None:
        for p in principals:
            for ev in self._waiters.get(p, ()):
                ev.set()

    def connected(self, principal: str) -> int:
        return len(self._waiters.get(principal, ()))
