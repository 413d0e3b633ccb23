"""uvicorn's httptools HTTP/1.1 protocol with a request-header timeout and size bound.

`agentmail serve` runs uvicorn on uvloop with httptools (the C parser): the
gateway's CPU per bare request halved against h11 on asyncio (bench/README.md,
"Server"). Two bounds uvicorn leaves out are added here:

- **time**: uvicorn (0.54) times out only idle keep-alive connections
  (`timeout_keep_alive`, armed after a response); a connection that sends
  nothing, or half a header, stayed open for ever: 500 such connections stayed
  open over 60 s, each holding a socket and a file descriptor. A header must be
  complete within `header_timeout_s` of the connection opening or the last
  response ending.
- **size**: httptools has no bound on a request header (h11 had 16 KiB). More
  than `header_max_bytes` of request line and headers is answered 431 and the
  connection closed; so is a header still incomplete after that many bytes.

- **body time**: a request body must be whole within `body_timeout_s` of its
  header (api/body_guard.py bounds its size). A client that sent a header with
  `Content-Length: 1000` and then stalled, or dribbled a byte every few seconds,
  held its connection and the app's request for as long as it liked.

It subclasses uvicorn's protocol class (not a public API;
tests/e2e/test_header_timeout.py and test_body_timeout.py check the behaviour on
every uvicorn we pin).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_MAX_BYTES = 16 * 1024
LOOP = "uvloop"  # uvicorn.Config(loop=...) of `agentmail serve`

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 31\r\n"
    b"connection: close\r\n\r\n"
    b"Request header fields too large"
)


class HeaderLimitsProtocol(HttpToolsProtocol):
    """Closes a connection whose next request header is not complete within
    `header_timeout_s`, and answers 431 to one larger than `header_max_bytes`."""

    header_timeout_s: float = 10.0
    header_max_bytes: int = HEADER_MAX_BYTES
    body_timeout_s: float = 60.0
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _waiting_header = True  # a request's header has begun (or may begin) and is not whole
    _raw_bytes = 0  # bytes of reads that began while waiting for a header
    _header_bytes = 0  # request line and header fields parsed so far

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._body_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._waiting_header:
            self._raw_bytes += len(data)
        super().data_received(data)
        # Still no whole header after this many bytes: nothing within the
        # bound can follow (a header completed in this read was checked whole).
        if self._waiting_header and self._raw_bytes > self.header_max_bytes:
            self._refuse()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._waiting_header = True
        self._header_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._header_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._waiting_header = False
        self._raw_bytes = 0
        self._disarm()
        if self._header_bytes > self.header_max_bytes:
            self._refuse()
            return
        super().on_headers_complete()
        # Its body, if any, must follow in time (a bodiless request completes now).
        self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_timed_out)

    def on_body(self, body: bytes) -> None:
        if not self.transport.is_closing():
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_done()
        if not self.transport.is_closing():
            super().on_message_complete()

    def _body_done(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # the next request's header is whole: it starts now
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._waiting_header = True
            self._arm()  # waiting for the next request's header

    def _refuse(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE)
            self.transport.close()

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


def with_header_limits(
    seconds: float, max_bytes: int = HEADER_MAX_BYTES, body_seconds: float = 60.0
) -> type[HeaderLimitsProtocol]:
    """The protocol class for uvicorn.Config(http=...), with these bounds."""
    return type(
        "HeaderLimitsProtocol",
        (HeaderLimitsProtocol,),
        {
            "header_timeout_s": seconds,
            "header_max_bytes": max_bytes,
            "body_timeout_s": body_seconds,
        },
    )
