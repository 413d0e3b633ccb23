"""uvicorn's HTTP/1.1 protocol with a request-header timeout.

uvicorn (0.54) times out only idle keep-alive connections (`timeout_keep_alive`,
armed after a response); a connection that sends nothing, or half a header,
stays open for ever: 500 such connections stayed open over 60 s, each holding a
socket and a file descriptor. h11 already bounds the header's size
(`h11_max_incomplete_event_size`, 16 KiB); this adds the time bound. The body
is not covered: once its header is complete a request is the app's.

It subclasses uvicorn's h11 protocol (not a public API; tests/e2e/
test_header_timeout.py checks the behaviour on every uvicorn we pin).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    """Closes a connection whose next request header is not complete within
    `header_timeout_s` of the connection opening or the last response ending."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a header arrived whole
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # waiting for the next request's header

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _timed_out(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for uvicorn.Config(http=...), with this timeout."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": seconds})
