"""Exponential reconnect delays with jitter.

A plain class, not a dataclass, and ``random`` imported on the first delay: the
hook's ask path (client/lite.py) imports this on every asking call and rarely
reconnects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random


class Backoff:
    """Delays that start at ``initial`` seconds and double up to ``cap``.

    Each delay is drawn from ``[d/2, d]`` ("equal jitter") so that many clients
    cut off together (a gateway restart) do not all come back at the same instant.
    """

    def __init__(
        self,
        initial: float = 0.2,
        cap: float = 10.0,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= cap or factor < 1:
            raise ValueError("need 0 < initial <= cap and factor >= 1")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.rng = rng
        self._next = initial

    def __repr__(self) -> str:
        return f"Backoff(initial={self.initial!r}, cap={self.cap!r}, factor={self.factor!r})"

    def follow(self, retry_ms: int | None) -> None:
        """Start from the server's SSE ``retry:`` (milliseconds), within the cap."""
        if retry_ms is not None:
            self.initial = min(max(retry_ms / 1000, 0.001), self.cap)

    def next_delay(self) -> float:
        """The delay before the next attempt; each call doubles the following one."""
        if self.rng is None:
            import random

            self.rng = random.Random()
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return delay / 2 + self.rng.uniform(0, delay / 2)

    def reset(self) -> None:
        """Start over from ``initial`` (after a connection that worked)."""
        self._next = self.initial
