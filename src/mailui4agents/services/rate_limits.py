"""Rate limits: failed logins per username and per client address, and all logins
per address, each in a sliding window (docs/limits.md). Pairing codes, notification
tokens and renewed push subscriptions count against the same address budget.

In memory, in this process: the gateway is one process (docs/design.md, "Login
limits" says why no rate-limit library).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mailui4agents.domain.errors import RateLimited
from mailui4agents.settings import Settings


class SlidingWindow:
    """At most `limit` hits per key in any `window_s` seconds. Keeps only the
    last `limit` hit times per key and at most `max_keys` keys (the least recently
    hit are forgotten first), so memory stays bounded whatever the keys are."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self.max_keys = max_keys
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, key: str) -> float | None:
        """Seconds until `key` may be hit again; None when it may be hit now."""
        hits = self._hits.get(key)
        if hits is None:
            return None
        now = self.clock()
        while hits and hits[0] <= now - self.window_s:
            hits.popleft()
        if not hits:
            del self._hits[key]
            return None
        if len(hits) < self.limit:
            return None
        return hits[0] + self.window_s - now

    def hit(self, key: str) -> float:
        """Record a hit now; returns its time (for `undo`)."""
        now = self.clock()
        hits = self._hits.get(key)
        if hits is None:
            hits = self._hits[key] = deque(maxlen=self.limit)
            while len(self._hits) > self.max_keys:
                self._hits.popitem(last=False)
        else:
            self._hits.move_to_end(key)
        hits.append(now)
        return now

    def undo(self, key: str, stamp: float) -> None:
        """Take back the hit made at `stamp` (it turned out not to count)."""
        hits = self._hits.get(key)
        if hits is not None and stamp in hits:
            hits.remove(stamp)


def refuse_over(checks: Iterable[tuple[SlidingWindow, str]], what: str) -> None:
    """RateLimited ("too many {what}; try again in N s") when any window is full
    for its key, with the longest wait; nothing otherwise."""
    waits = [w for window, key in checks if (w := window.retry_after(key)) is not None]
    if waits:
        retry = max(1, math.ceil(max(waits)))
        raise RateLimited(f"too many {what}; try again in {retry} s", retry_after=retry)


class AddressGuess:
    """One use of an unguessable token from a client address (a notification's
    action token, an e-mail's one-click link, a push subscription's renewal).
    Only a bad one counts, as a failed login of the address; a good one costs
    nothing, so receipts and taps never use up the address's login attempts
    (behind a proxy without --forwarded-allow-ips, everyone shares one address)."""

    def __init__(self, guard: LoginGuard, address: str) -> None:
        self.failures, self.address = guard.address_failures, address
        refuse_over(
            [(self.failures, address)],
            "bad notification or e-mail link tokens, or logins, from this address",
        )

    def bad(self) -> None:
        self.failures.hit(self.address)


@dataclass
class LoginAttempt:
    """One login in progress: counted as a failure until it proves otherwise, so
    concurrent guesses cannot overrun the limit while their hashes are checked."""

    guard: LoginGuard
    user_key: str
    address: str
    user_stamp: float
    address_stamp: float

    def succeeded(self) -> None:
        self.guard.user_failures.undo(self.user_key, self.user_stamp)
        self.guard.address_failures.undo(self.address, self.address_stamp)


class LoginGuard:
    """Failed logins per username and per client address, and all logins per
    address, each in a sliding window. Once a limit is reached every login it
    covers is refused (RateLimited) — a correct password too — until the window lets
    the oldest attempt go: otherwise a guesser would learn when it guessed right."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        window = settings.login_window_s
        self.user_failures = SlidingWindow(settings.login_failures_per_user, window, clock=clock)
        self.address_failures = SlidingWindow(
            settings.login_failures_per_address, window, clock=clock
        )
        self.address_attempts = SlidingWindow(
            settings.login_attempts_per_address, window, clock=clock
        )

    def set_clock(self, clock: Callable[[], float]) -> None:
        for w in (self.user_failures, self.address_failures, self.address_attempts):
            w.clock = clock

    def begin(self, username: str, address: str) -> LoginAttempt:
        """Refuse (RateLimited) a login over a limit; else count it and return it."""
        user_key = username[:200]
        refuse_over(
            [
                (self.user_failures, user_key),
                (self.address_failures, address),
                (self.address_attempts, address),
            ],
            "login attempts for this user or from this address",
        )
        self.address_attempts.hit(address)
        return LoginAttempt(
            self,
            user_key,
            address,
            self.user_failures.hit(user_key),
            self.address_failures.hit(address),
        )
