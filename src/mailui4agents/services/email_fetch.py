"""Fetching inbound e-mail from the gateway's own IMAP mailbox (docs/email.md,
"Receiving"), with the standard library's `imaplib` in a worker thread.

One connection, used by one task: every IMAP command runs in a worker thread
(`anyio.to_thread`), one at a time. A pass searches the mailbox for messages not
deleted, takes up to `email_in_per_pass` of them, fetches each whole (BODY.PEEK:
nothing is marked read by the fetch) and hands its bytes to the handler (in the
app: `email_inbound.receive(gw, raw, via="imap")`). Only after the handler
returned is the message marked `\\Seen \\Deleted` and expunged: a gateway that
dies in between fetches it again after its restart, and receive() knows it
already (its Message-ID, or the hash of its bytes). A handler that raises leaves
the message where it is (counted, logged); the next pass tries it again, after
the messages that never failed.

Between passes it waits for new mail: with IDLE (RFC 2177) when the server
offers it, renewed every `imap_poll_s` (servers drop an IDLE after 30 minutes);
else a poll every `imap_poll_s`. imaplib has no IDLE: `_idle` writes the command
and reads the untagged lines itself, waiting in `select()` on the socket and on
a wake-up socket that the app's stop event writes to, so a stop ends the IDLE at
once with a proper DONE. On any error the connection is dropped and made again
after a back-off (1 s, doubled up to 5 min, reset by a pass that worked).

Each outcome is counted in `ImapFetcher.counts`; failures are logged.
"""

from __future__ import annotations

import collections
import contextlib
import imaplib
import io
import logging
import re
import select
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mailui4agents.domain.email_address import Mailbox, parse_mailbox
from mailui4agents.services.email_send import password_from
from mailui4agents.settings import Settings

log = logging.getLogger("mailui4agents.email.imap")

TIMEOUT_S = 60.0  # each IMAP command's answer (a whole message of email_in_max_bytes too)
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 300.0
_EXISTS = re.compile(rb"^\* \d+ EXISTS")
_SIZE = re.compile(rb"UID (\d+).*RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+).*UID (\d+)")

Handler = Callable[[bytes], Awaitable[Any]]


class ImapError(RuntimeError):
    """The server refused what the fetcher needs (login, the mailbox, STARTTLS)."""


def load_password(settings: Settings) -> str | None:
    """The IMAP password: the first line of imap_password_file, else the
    environment's AGENTMAIL_IMAP_PASSWORD, else None."""
    return password_from(settings.imap_password_file, settings.imap_password, "IMAP")


def _quoted(mailbox: str) -> str:
    return '"' + mailbox.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ImapFetcher:
    """Takes the mailbox's messages to `handler`, each once; one per gateway
    process (the app's lifespan runs it when imap_url is set)."""

    def __init__(
        self,
        settings: Settings,
        password: str | None,
        handler: Handler,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
    ) -> None:
        assert settings.imap_url is not None
        self.settings = settings
        self.mailbox: Mailbox = parse_mailbox(settings.imap_url)
        self._password = password or ""
        self.handler = handler
        self.backoff_base_s = backoff_base_s
        self.counts: collections.Counter[str] = collections.Counter()
        self.last_error: str | None = None
        self.idle_supported: bool | None = None  # known once connected
        self._client: imaplib.IMAP4 | None = None
        self._uidvalidity = b""
        self._failed: set[tuple[bytes, int]] = set()  # handler raised: tried after the others
        self._too_big: set[tuple[bytes, int]] = set()  # left in the mailbox, logged once
        self._tls: ssl.SSLContext | None = None
        # Written to by the stop event, read by `_idle`'s select(); made by `run`.
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._progress = anyio.Event()

    # the loop ----------------------------------------------------------------------

    async def run(self, stop: anyio.Event) -> None:
        """Passes until `stop`; a pass in progress finishes (each command within TIMEOUT_S)."""
        backoff = self.backoff_base_s
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            while not stop.is_set():
                try:
                    await self._connect()
                    while not stop.is_set():
                        full = await self.fetch_pass()
                        backoff = self.backoff_base_s  # this connection works
                        if not full and not stop.is_set():
                            await self._wait_for_mail(stop)
                except (imaplib.IMAP4.error, ImapError, OSError, EOFError) as exc:
                    self.counts["connection_errors"] += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.warning(
                        "IMAP %s: %s; again in %.0f s",
                        self.mailbox.shown(),
                        self.last_error,
                        backoff,
                    )
                except Exception as exc:  # a bug: counted and logged, then again
                    self.counts["errors"] += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.exception("IMAP %s: the fetcher failed", self.mailbox.shown())
                finally:
                    await anyio.to_thread.run_sync(self._close)
                self._done()
                if stop.is_set():
                    break
                with anyio.move_on_after(backoff):
                    await stop.wait()
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        finally:
            self._wake_r.close()
            self._wake_w.close()
            self._wake_r = self._wake_w = None

    async def _wait_for_mail(self, stop: anyio.Event) -> None:
        """Until new mail (IDLE), or imap_poll_s, or `stop`."""
        wait_s = self.settings.imap_poll_s
        wake = self._wake_w
        if not self.idle_supported or wake is None:
            with anyio.move_on_after(wait_s):
                await stop.wait()
            return

        async def wake_on_stop() -> None:
            await stop.wait()
            assert wake is not None
            wake.send(b"x")

        failed: list[BaseException] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(wake_on_stop)
            try:
                why = await anyio.to_thread.run_sync(self._idle, wait_s)
                self.counts[f"idle_{why}"] += 1
            except Exception as exc:  # raised below, not as a task group's ExceptionGroup
                failed.append(exc)
            tg.cancel_scope.cancel()
        if failed:
            raise failed[0]

    def _idling(self) -> None:
        self.counts["idles"] += 1
        self._done()

    def _done(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def wait_progress(self, within_s: float) -> None:
        """Until the next pass, IDLE or reconnection (tests)."""
        with anyio.move_on_after(within_s):
            await self._progress.wait()

    # one pass ----------------------------------------------------------------------

    async def fetch_pass(self) -> bool:
        """Hand every waiting message (up to email_in_per_pass) to the handler; True
        when the limit was reached (more may wait)."""
        limit = self.settings.email_in_per_pass
        uids = await anyio.to_thread.run_sync(self._search)
        key = self._uidvalidity
        waiting = [u for u in uids if (key, u) not in self._too_big]
        # Messages the handler failed on go last: one that always fails does not
        # hold back the rest.
        waiting.sort(key=lambda u: ((key, u) in self._failed, u))
        batch = waiting[:limit]
        sizes = await anyio.to_thread.run_sync(self._sizes, batch) if batch else {}
        for uid in batch:
            size = sizes.get(uid)
            if size is None:  # expunged meanwhile (another replica took it)
                continue
            if size > self.settings.email_in_max_bytes:
                self._too_big.add((key, uid))
                self.counts["too_big"] += 1
                log.warning(
                    "IMAP %s: message UID %d is %d bytes, over email_in_max_bytes (%d): "
                    "left in the mailbox, not read",
                    self.mailbox.shown(),
                    uid,
                    size,
                    self.settings.email_in_max_bytes,
                )
                continue
            raw = await anyio.to_thread.run_sync(self._fetch, uid)
            if raw is None:
                continue
            self.counts["fetched"] += 1
            try:
                got = await self.handler(raw)
            except Exception as exc:
                self._failed.add((key, uid))
                self.counts["handler_errors"] += 1
                self.last_error = f"handler: {type(exc).__name__}: {exc}"
                log.exception(
                    "IMAP %s: message UID %d could not be handled; left in the mailbox",
                    self.mailbox.shown(),
                    uid,
                )
                continue
            self.counts["handled"] += 1
            outcome = getattr(got, "outcome", None)
            if isinstance(outcome, str):
                self.counts[f"outcome_{outcome}"] += 1
            await anyio.to_thread.run_sync(self._remove, uid)
            self._failed.discard((key, uid))
            self.counts["removed"] += 1
        self.counts["passes"] += 1
        self._done()
        return len(waiting) > limit

    # IMAP, in the worker thread ----------------------------------------------------

    def tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            cafile = self.settings.imap_ca_file
            self._tls = ssl.create_default_context(cafile=str(cafile) if cafile else None)
        return self._tls

    async def _connect(self) -> None:
        await anyio.to_thread.run_sync(self._open)
        self.counts["connects"] += 1

    def _open(self) -> None:
        box = self.mailbox
        client: imaplib.IMAP4
        if box.implicit_tls:
            client = imaplib.IMAP4_SSL(
                box.host, box.port, ssl_context=self.tls_context(), timeout=TIMEOUT_S
            )
        else:
            client = imaplib.IMAP4(box.host, box.port, timeout=TIMEOUT_S)
        self._client = client
        if not box.implicit_tls:
            if "STARTTLS" in client.capabilities:
                client.starttls(ssl_context=self.tls_context())
            elif not box.loopback:
                raise ImapError(
                    f"{box.shown()} offers no STARTTLS: the password and the mail cross "
                    "the network in clear only to a loopback server"
                )
        client.login(box.username, self._password)
        typ, data = client.select(_quoted(box.mailbox))
        if typ != "OK":
            raise ImapError(f"cannot select {box.mailbox!r}: {data!r}")
        validity = client.untagged_responses.get("UIDVALIDITY") or [b""]
        last = validity[-1]
        uidvalidity = last if isinstance(last, bytes) else b""
        if uidvalidity != self._uidvalidity:  # other UIDs now: what was known of the old is moot
            self._failed.clear()
            self._too_big.clear()
        self._uidvalidity = uidvalidity
        self.idle_supported = "IDLE" in client.capabilities

    def _close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.logout()  # also closes the socket when the server is gone
        except Exception:
            with contextlib.suppress(Exception):  # nothing left to close
                client.shutdown()

    def _cl(self) -> imaplib.IMAP4:
        if self._client is None:
            raise ImapError("not connected")
        return self._client

    def _search(self) -> list[int]:
        client = self._cl()
        # imaplib keeps every untagged answer it was not asked for (EXISTS, FETCH
        # flags, …) in this dict, for the life of the connection: dropped each pass.
        client.untagged_responses.clear()
        # A server updates the selected mailbox's view between commands: NOOP
        # first, so that SEARCH sees what arrived since the last one.
        client.noop()
        typ, data = client.uid("SEARCH", "UNDELETED")
        if typ != "OK":
            raise ImapError(f"SEARCH failed: {data!r}")
        return [int(u) for u in b" ".join(d for d in data if d).split()]

    def _sizes(self, uids: list[int]) -> dict[int, int]:
        typ, data = self._cl().uid("FETCH", ",".join(map(str, uids)), "(RFC822.SIZE)")
        if typ != "OK":
            raise ImapError(f"FETCH RFC822.SIZE failed: {data!r}")
        sizes: dict[int, int] = {}
        for item in data:
            line = item[0] if isinstance(item, tuple) else item
            found = _SIZE.search(line or b"")
            if found:
                a, b, c, d = found.groups()
                uid, size = (int(a), int(b)) if a else (int(d), int(c))
                sizes[uid] = size
        return sizes

    def _fetch(self, uid: int) -> bytes | None:
        typ, data = self._cl().uid("FETCH", str(uid), "(BODY.PEEK[])")
        if typ != "OK":
            raise ImapError(f"FETCH {uid} failed: {data!r}")
        for item in data:
            if isinstance(item, tuple) and len(item) == 2:
                return bytes(item[1])
        return None  # gone meanwhile

    def _remove(self, uid: int) -> None:
        client = self._cl()
        typ, data = client.uid("STORE", str(uid), "+FLAGS.SILENT", r"(\Seen \Deleted)")
        if typ != "OK":
            raise ImapError(f"STORE {uid} failed: {data!r}")
        if "UIDPLUS" in client.capabilities:
            typ, data = client.uid("EXPUNGE", str(uid))  # only this one (RFC 4315)
        else:
            typ, data = client.expunge()
        if typ != "OK":
            raise ImapError(f"EXPUNGE {uid} failed: {data!r}")

    def _idle(self, seconds: float) -> str:
        """One IDLE: "mail" (the server said EXISTS), "timeout" or "stop"."""
        client = self._cl()
        tag = b"AMIDLE"
        client.send(tag + b" IDLE\r\n")
        line = client.readline()
        if not line.startswith(b"+"):
            raise ImapError(f"IDLE refused: {line[:200]!r}")
        anyio.from_thread.run_sync(self._idling)
        why = "timeout"
        deadline = time.monotonic() + seconds
        sock = client.socket()
        wake = self._wake_r
        assert wake is not None
        while True:
            if not _buffered(client):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ready, _, _ = select.select([sock, wake], [], [], left)
                if wake in ready:
                    wake.recv(64)
                    why = "stop"
                    break
                if not ready:
                    break
            line = client.readline()
            if not line:
                raise EOFError("the IMAP server closed the connection during IDLE")
            if line.startswith(b"* BYE"):
                raise ImapError(f"the IMAP server said {line[:200]!r}")
            if _EXISTS.match(line):
                why = "mail"
                break
        client.send(b"DONE\r\n")
        while True:
            line = client.readline()
            if not line:
                raise EOFError("the IMAP server closed the connection after IDLE")
            if line.startswith(tag + b" "):
                if not line[len(tag) + 1 :].startswith(b"OK"):
                    raise ImapError(f"IDLE ended with {line[:200]!r}")
                return why


def _buffered(client: imaplib.IMAP4) -> bool:
    """Bytes already read from the socket (imaplib's buffered file, or TLS's
    decrypted records) that select() would not report."""
    sock = client.socket()
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    old = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        file = client.file
        assert isinstance(file, io.BufferedReader)  # imaplib: sock.makefile("rb")
        return bool(file.peek(1))
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    finally:
        sock.settimeout(old)
