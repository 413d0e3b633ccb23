"""An SMTP relay of our own on 127.0.0.1: what the gateway sends e-mail to in
tests, in place of a provider's submission server.

A real SMTP server (`aiosmtpd`, the maintained asyncio server) on port 0, in a
thread with its own event loop. It keeps every message it accepted
(`messages`: envelope and parsed message), and answers as told:
`answer("rcpt", "550 5.1.1 no such user")` or `answer("data", "451 4.3.0 later")`
queues answers for that step (each used once; then 250 again);
`answer("data", DROP)` accepts the message, then closes the connection before
saying so (the "did the relay take it?" case). With `users`, AUTH is required
and checked (plain, over the clear loopback connection: aiosmtpd's
`auth_require_tls=False`). `wait(n)` / `await wait_async(n)` wait for messages
with a deadline, never a sleep.

With `deliver_to` (a tests/fakes/dovecot.Dovecot), each message it takes is
also delivered into Dovecot by LMTP before DATA is answered, as a provider's
relay delivers into its mailboxes: a request e-mail lands in the person's
mailbox, read with imaplib like a mail client. LMTP's refusal (an unknown
mailbox) becomes the relay's answer to DATA, and the message is not recorded.
"""

from __future__ import annotations

import asyncio
import collections
import email
import email.message
import email.policy
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

DROP = "drop"


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    message: email.message.EmailMessage
    at: float
    tls: bool  # the message came over TLS (STARTTLS or implicit)


class Relay:
    def __init__(self, users: dict[str, str] | None = None, deliver_to: Any = None) -> None:
        self.users = users
        self.deliver_to = deliver_to  # a Dovecot (tests/fakes/dovecot.py), or None
        self.messages: list[Received] = []
        self.commands: list[str] = []  # "RCPT <to>: answer", "DATA: answer", "AUTH: ok|bad"
        self._answers: dict[str, collections.deque[str]] = {
            "rcpt": collections.deque(),
            "data": collections.deque(),
        }
        self._cond = threading.Condition()
        self.host = "127.0.0.1"
        self.port = 0

    scheme = "smtp"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def url_with_user(self, user: str) -> str:
        return f"smtp://{user}@{self.host}:{self.port}"

    def answer(self, step: str, *answers: str) -> None:
        with self._cond:
            self._answers[step].extend(answers)

    def _next(self, step: str) -> str | None:
        with self._cond:
            q = self._answers[step]
            return q.popleft() if q else None

    def _note(self, line: str) -> None:
        with self._cond:
            self.commands.append(line)
            self._cond.notify_all()

    # aiosmtpd's handler hooks ------------------------------------------------------

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        said = self._next("rcpt") or "250 OK"
        self._note(f"RCPT {address}: {said}")
        if said.startswith("250"):
            envelope.rcpt_tos.append(address)
        return said

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        said = self._next("data") or "250 2.0.0 Ok: queued"
        self._note(f"DATA: {said}")
        if said.startswith("250") or said == DROP:
            data = bytes(envelope.original_content or b"")
            if self.deliver_to is not None:
                refused = await self._lmtp(str(envelope.mail_from), list(envelope.rcpt_tos), data)
                if refused is not None:
                    self._note(f"LMTP: {refused}")
                    return refused
            msg = email.message_from_bytes(data, policy=email.policy.default)
            assert isinstance(msg, email.message.EmailMessage)
            tls = server.transport is not None and bool(
                server.transport.get_extra_info("ssl_object")
            )
            with self._cond:
                self.messages.append(
                    Received(
                        str(envelope.mail_from),
                        list(envelope.rcpt_tos),
                        data,
                        msg,
                        time.time(),
                        tls,
                    )
                )
                self._cond.notify_all()
        if said == DROP:
            transport = server.transport
            assert isinstance(transport, asyncio.Transport)
            transport.abort()  # taken, but the client never hears so
            return "250 2.0.0 Ok: queued"
        return said

    async def _lmtp(self, mail_from: str, rcpt_tos: list[str], data: bytes) -> str | None:
        """Deliver into Dovecot (in a thread: smtplib blocks); the first refusal, or None."""
        said = await asyncio.get_running_loop().run_in_executor(
            None, self.deliver_to.lmtp_deliver, mail_from, rcpt_tos, data
        )
        refused = [answer for answer in said.values() if not answer.startswith("250")]
        return refused[0] if refused else None

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and self.users is not None
            and self.users.get(data.login.decode()) == data.password.decode()
        )
        self._note(f"AUTH: {'ok' if ok else 'bad'}")
        return AuthResult(success=ok, handled=False)  # False: aiosmtpd answers 535 itself

    # waiting -----------------------------------------------------------------------

    def wait(self, n: int = 1, timeout: float = 10.0) -> list[Received]:
        """Block until `n` messages were accepted; AssertionError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"relay: {len(self.messages)} of {n} messages within {timeout} s; "
                        f"commands {self.commands}"
                    )
                self._cond.wait(left)
            return list(self.messages)

    def wait_commands(self, n: int, timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.commands) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"relay: commands {self.commands}, wanted {n}")
                self._cond.wait(left)
            return list(self.commands)

    async def wait_async(self, n: int = 1, within_s: float = 10.0) -> list[Received]:
        """`wait` from async code whose loop must keep running (an in-process gateway)."""
        return await anyio.to_thread.run_sync(lambda: self.wait(n, within_s))


@contextmanager
def smtp_relay(
    users: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
    implicit_tls: bool = False,
    port: int = 0,
    deliver_to: Any = None,
) -> Iterator[Relay]:
    """A relay listening on `host` (`port`; 0: a free one) until the block ends. With `tls` (a
    server context): STARTTLS offered and required, or with `implicit_tls` TLS
    from the first byte (smtps). With `deliver_to` (a Dovecot), every message taken
    is delivered into it by LMTP."""
    relay = Relay(users, deliver_to)
    relay.host = host
    relay.scheme = "smtps" if implicit_tls else "smtp"
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server: list[asyncio.AbstractServer] = []

    protocols: list[SMTP] = []

    def factory() -> SMTP:
        kwargs: dict[str, Any] = {"hostname": "relay.test", "ident": "test relay"}
        if tls is not None and not implicit_tls:
            kwargs.update(tls_context=tls, require_starttls=True)
        if users is not None:
            kwargs.update(
                authenticator=relay._authenticate, auth_required=True, auth_require_tls=False
            )
        with warnings.catch_warnings():
            # "Requiring AUTH while not requiring TLS": on loopback, on purpose.
            warnings.simplefilter("ignore", UserWarning)
            protocol = SMTP(relay, **kwargs)
        protocols.append(protocol)
        return protocol

    async def close() -> None:
        srv = server[0]
        srv.close()
        for p in protocols:
            if p.transport is not None:
                p.transport.close()
        await srv.wait_closed()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def serve() -> None:
        asyncio.set_event_loop(loop)
        srv = loop.run_until_complete(
            loop.create_server(
                factory, host, port, ssl=tls if implicit_tls else None, reuse_address=True
            )
        )
        server.append(srv)
        relay.port = srv.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()
        loop.run_until_complete(close())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True, name="smtp-relay")
    thread.start()
    assert ready.wait(10), "the SMTP relay did not start"
    try:
        yield relay
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
