"""The SMTP listener (`agentmail serve --smtp-listen HOST:PORT`, docs/email.md,
"Receiving"): for those who run an MX of their own, which forwards the gateway's
mail to it. `aiosmtpd`'s SMTP protocol on the gateway's own event loop.

- RCPT is accepted only for the gateway's domain (the domain of mail_from):
  `agentmail+<token>@gw.example.org`, `claude+shop@gw.example.org`; any other is
  550, so the listener is never an open relay. At most MAX_RECIPIENTS per message.
- A message over `email_in_max_bytes` is refused with 552 (aiosmtpd's SIZE
  limit, also announced in EHLO and checked at `MAIL FROM … SIZE=`).
- DATA is answered 250 only after the handler returned (in the app:
  `email_inbound.receive(gw, raw, via="smtp", envelope_to=…)`), so a message
  the gateway accepted is one it has acted on. If the handler raises, the answer
  is 451: the sending MX keeps the message and tries again later, and receive()
  knows a message it already took.
- At most MAX_CONNECTIONS at once (421 to the next); each command within
  TIMEOUT_S.

There is no AUTH and no STARTTLS: bind it to loopback or a private network
that only your MX reaches. Each outcome is counted in `SmtpListener.counts`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from mailui4agents.domain.email_address import (
    BadAddress,
    domain_of,
    normalise_address,
    parse_listen,
)
from mailui4agents.settings import Settings

log = logging.getLogger("mailui4agents.email.smtp_in")

MAX_RECIPIENTS = 20
MAX_CONNECTIONS = 20
TIMEOUT_S = 60.0  # aiosmtpd's idle timeout per command

Handler = Callable[[bytes, Sequence[str]], Awaitable[Any]]


class _Handler:
    """aiosmtpd's hooks (handle_RCPT, handle_DATA) for one listener."""

    def __init__(self, listener: SmtpListener) -> None:
        self.listener = listener

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        lis = self.listener
        try:
            rcpt = normalise_address(address)
        except BadAddress:
            lis.counts["rcpt_refused"] += 1
            return "553 5.1.3 not a valid address"
        if domain_of(rcpt) != lis.domain:
            lis.counts["rcpt_refused"] += 1
            log.info("SMTP in: RCPT %s refused: not %s", address, lis.domain)
            return f"550 5.7.1 <{address}>: this server takes mail for {lis.domain} only"
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            lis.counts["rcpt_refused"] += 1
            return "452 4.5.3 too many recipients"
        envelope.rcpt_tos.append(rcpt)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        lis = self.listener
        raw = bytes(envelope.original_content or b"")
        try:
            got = await lis.handler(raw, list(envelope.rcpt_tos))
        except Exception:
            lis.counts["handler_errors"] += 1
            log.exception("SMTP in: a message to %s could not be handled: 451", envelope.rcpt_tos)
            return "451 4.3.0 the gateway could not take the message now; try again later"
        lis.counts["accepted"] += 1
        outcome = getattr(got, "outcome", None)
        if isinstance(outcome, str):
            lis.counts[f"outcome_{outcome}"] += 1
        return "250 2.0.0 OK"


class _Protocol(SMTP):
    """aiosmtpd's SMTP, with a cap on connections at once."""

    def __init__(self, listener: SmtpListener, **kwargs: Any) -> None:
        super().__init__(_Handler(listener), **kwargs)
        self.listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        lis = self.listener
        if len(lis.open) >= MAX_CONNECTIONS:
            lis.counts["busy"] += 1
            assert isinstance(transport, asyncio.Transport)
            transport.write(b"421 4.3.2 too many connections, try again later\r\n")
            transport.close()
            return
        lis.open.add(self)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.open.discard(self)
        super().connection_lost(exc)


class SmtpListener:
    """Listens on settings.smtp_listen while started; the app's lifespan starts
    and stops it."""

    def __init__(self, settings: Settings, handler: Handler) -> None:
        assert settings.smtp_listen is not None and settings.mail_from is not None
        self.settings = settings
        self.where = parse_listen(settings.smtp_listen)
        self.domain = domain_of(settings.mail_from)
        self.handler = handler
        self.counts: collections.Counter[str] = collections.Counter()
        self.open: set[_Protocol] = set()
        self.port = 0  # the bound port, once started
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def factory() -> SMTP:
            return _Protocol(
                self,
                hostname=self.domain,
                ident="agentmail",
                data_size_limit=self.settings.email_in_max_bytes,
                timeout=TIMEOUT_S,
                loop=loop,
            )

        self._server = await loop.create_server(factory, self.where.host, self.where.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("SMTP in: listening on %s:%d for %s", self.where.host, self.port, self.domain)

    async def stop(self) -> None:
        """No new connections; open ones closed (a message whose DATA is not
        answered yet gets no 250: the sender tries again)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for protocol in list(self.open):
            if protocol.transport is not None:
                protocol.transport.close()
        await server.wait_closed()
