"""Send budgets and hop limits: what keeps agents from talking forever
(docs/behaviour.md#replies-relays-budgets-loops);
and the login attempt limits.

Two agents that auto-reply to each other once thanked each other for six rounds.
The hop limit stops relay chains; the budget bounds what one agent may send in a
session between two human interventions.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import and_, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, RecipientRow, SessionRow
from mailui4agents.domain.errors import Conflict, Invalid, RateLimited
from mailui4agents.domain.relay_keys import RELAY_KEY_MAX_BYTES
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings


def check_relay_key(key: str) -> None:
    """A relay key fits in RELAY_KEY_MAX_BYTES (clients shorten longer ones with
    clamp_relay_key); refused (Invalid) otherwise."""
    size = len(key.encode())
    if size > RELAY_KEY_MAX_BYTES:
        raise Invalid(
            "relay_key",
            f"relay_key is {size} bytes; at most {RELAY_KEY_MAX_BYTES} "
            "(clients shorten long keys with ':sha256:<hex>')",
            code="relay_key_too_long",
        )


def counts_toward_budget(relay: bool, recipients_human: list[bool]) -> bool:
    """Relays to humans are free (they are answers); everything else counts,
    relays to agents included."""
    return not (relay and recipients_human and all(recipients_human))


async def _last_human_seq(s: AsyncSession, session_id: str) -> int:
    seq = await s.scalar(
        select(func.max(MailRow.seq)).where(
            MailRow.session_id == session_id, MailRow.from_human.is_(True)
        )
    )
    return int(seq or 0)


async def budget_used(s: AsyncSession, agent: str, session_id: str) -> int:
    """The agent's counted sends in the session since the last human mail there.

    A human's mail opens a new budget: the budget bounds an agent's autonomy
    between interventions, and a refused send can succeed after a human replies.
    """
    since = await _last_human_seq(s, session_id)
    to_an_agent = exists().where(
        RecipientRow.mail_seq == MailRow.seq, RecipientRow.is_human.is_(False)
    )
    free = and_(MailRow.relay.is_(True), ~to_an_agent)
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.from_name == agent,
            MailRow.seq > since,
            MailRow.type.in_(("message", "relay", "calendar")),  # scheduled mail counts too
            ~free,
        )
    )
    return int(n or 0)


async def trailing_relays(s: AsyncSession, session_id: str) -> int:
    """The length of the run of relay mails at the end of the session. Any
    non-relay message (a human, or an agent writing on its own) ends the run."""
    last_plain = await s.scalar(
        select(func.max(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.relay.is_(False),
            MailRow.type == "message",
        )
    )
    n = await s.scalar(
        select(func.count(MailRow.seq)).where(
            MailRow.session_id == session_id,
            MailRow.relay.is_(True),
            MailRow.seq > (last_plain or 0),
        )
    )
    return int(n or 0)


async def check_send(
    s: AsyncSession,
    settings: Settings,
    sender: Principal,
    session: SessionRow,
    relay: bool,
    recipients_human: list[bool],
) -> None:
    """Refuse (Conflict) a send over the hop limit or the budget. Nothing is written
    before this check, so a refused relay keeps its key free for a later retry."""
    if sender.kind != "agent":
        return
    if relay and await trailing_relays(s, session.id) >= session.hop_limit:
        raise Conflict(
            f"session '{session.alias}' reached its hop limit of {session.hop_limit} "
            "relays in a row; it continues when someone writes a message of their own",
            code="hop_limit",
            hop_limit=session.hop_limit,
        )
    if not counts_toward_budget(relay, recipients_human):
        return
    used = await budget_used(s, sender.name, session.id)
    if used >= settings.send_budget:
        raise Conflict(
            f"'{sender.name}' used its budget of {settings.send_budget} sends in session "
            f"'{session.alias}'; a human's mail there opens a new budget",
            code="budget_exhausted",
            budget=settings.send_budget,
        )


# --- login attempts -----------------------------------------------------------------
#
# In memory, in this process: the gateway is one process (docs/design.md, "Login
# limits" says why no rate-limit library).


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
        waits = [
            self.user_failures.retry_after(user_key),
            self.address_failures.retry_after(address),
            self.address_attempts.retry_after(address),
        ]
        wait = max((w for w in waits if w is not None), default=None)
        if wait is not None:
            retry = max(1, math.ceil(wait))
            raise RateLimited(
                f"too many login attempts for this user or from this address; "
                f"try again in {retry} s",
                retry_after=retry,
            )
        self.address_attempts.hit(address)
        return LoginAttempt(
            self,
            user_key,
            address,
            self.user_failures.hit(user_key),
            self.address_failures.hit(address),
        )
