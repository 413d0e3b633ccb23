"""Exponential reconnect delays with jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays that start at ``initial`` seconds and double up to ``cap``.

    Each delay is drawn from ``[d/2, d]`` ("equal jitter") so that many clients
    cut off together (a gateway restart) do not all come back at the same instant.
    """

    initial: float = 0.2
    cap: float = 10.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random)
    _next: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.cap or self.factor < 1:
            raise ValueError("need 0 < initial <= cap and factor >= 1")
        self._next = self.initial

    def next_delay(self) -> float:
        """The delay before the next attempt; each call doubles the following one."""
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return delay / 2 + self.rng.uniform(0, delay / 2)

    def reset(self) -> None:
        """Start over from ``initial`` (after a connection that worked)."""
        self._next = self.initial
