"""The gateway's runtime state, created by the app's lifespan (never at import)."""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import anyio
from argon2 import PasswordHasher
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.engine import Database
from mailui4agents.events import log
from mailui4agents.events.hub import EventHub, LiveEvent
from mailui4agents.services import identity
from mailui4agents.services.push_send import PushSender
from mailui4agents.services.rate_limits import LoginGuard
from mailui4agents.settings import Settings

if TYPE_CHECKING:  # aiosmtplib and aiosmtpd are imported only by a gateway that mails
    from mailui4agents.metrics import GatewayMetrics
    from mailui4agents.services.email_fetch import ImapFetcher
    from mailui4agents.services.email_listen import SmtpListener
    from mailui4agents.services.email_send import EmailSender

# A write transaction as adapters hold it (web/row_actions.py): they pass it on
# to a service and never query it themselves (tests/architecture/test_adapters.py).
Transaction = AsyncSession


@dataclass
class Gateway:
    settings: Settings
    db: Database
    hub: EventHub
    hasher: PasswordHasher
    logins: LoginGuard
    # Argon2 runs in worker threads, this many at once (memory: argon2_memory_kib each).
    hash_slots: anyio.CapacityLimiter
    # Sends queued Web Push (services/push_send.py); the app's lifespan runs it.
    push: PushSender | None = field(default=None)
    # Sends queued e-mail (services/email_send.py) when smtp_url is set.
    email: EmailSender | None = field(default=None)
    # Inbound e-mail (docs/email.md, "Receiving"): the IMAP fetcher when imap_url
    # is set, the SMTP listener when smtp_listen is; the lifespan runs them.
    imap: ImapFetcher | None = field(default=None)
    smtp_in: SmtpListener | None = field(default=None)
    # Inbound e-mail's outcomes in this process (services/email_inbound.py):
    # decided, posted, started, duplicate, refused and refused:<reason>.
    email_in_counts: collections.Counter[str] = field(default_factory=collections.Counter)
    # The TXT lookup DKIM keys are read with (services/email_dkim.py); None:
    # dkimpy's own, over DNS. Tests give a resolver stub.
    dkim_dns: Callable[..., bytes | None] | None = field(default=None)
    # Prometheus metrics of this process (metrics.py); None: not counted.
    metrics: GatewayMetrics | None = field(default=None)
    # time.monotonic() when the scheduler last finished a pass (its lag, metrics.py).
    scheduler_done_at: float | None = field(default=None)
    # The fd of the data dir's shared lock (data_lock.py), released when the lifespan ends.
    data_lock: int | None = field(default=None)

    @asynccontextmanager
    async def write(self, *, inline: bool = False) -> AsyncIterator[AsyncSession]:
        """A write transaction; the events it appended go to the open streams
        after the commit (never before: they may yet be rolled back), handed to
        the hub as they were written, or read back by it (events/hub.py).
        `inline`: see Database.write."""
        notify = published = None
        try:
            async with self.db.write(inline=inline) as s:
                s.info[log.LISTENING] = self.hub.listening
                s.info[log.REPLICA] = self.hub.replica
                yield s
                notify = s.info.pop("notify", None)
                published = s.info.pop(log.PUBLISHED, None)
                recheck = s.info.pop("recheck", None)
                noted = s.info.pop("metrics", None)
        except BaseException:
            # The commit raised or was cancelled (a task cancelled while
            # PostgreSQL answers the COMMIT): it may have gone through all the
            # same, and on PostgreSQL our own NOTIFY does not wake this hub
            # (events/pg_listen.py). A shared read of the log finds its events
            # if it did, nothing if not.
            if notify or published:  # popped once the block ended: it appended
                self.hub.notify(())
            raise
        if noted and self.metrics is not None:
            self.metrics.committed(noted)
        if published and self.hub.listening:
            self.hub.publish(log.live_events(published))
        elif notify:
            self.hub.notify(notify)
        if recheck:
            self.hub.recheck(recheck)

    def attach_hub(self) -> None:
        """Give the hub its two log reads (one shared read per commit)."""

        async def read_after(after: int, limit: int) -> list[LiveEvent]:
            async with self.read() as s:
                return await log.after_all(s, after, limit)

        async def read_head() -> int:
            async with self.read() as s:
                return await log.last_id(s)

        async def check_tokens(tokens: set[str]) -> dict[str, datetime | None]:
            async with self.read() as s:
                return await identity.tokens_until(s, tokens)

        self.hub.attach(read_after, read_head, check_tokens)

    def read(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self.db.read()
