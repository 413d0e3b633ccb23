"""A blocking HTTP/1.1 client on the standard library alone, and the blocking
driver of the one ask protocol (client/asking.py) over it.

The hook process asks a human through it (hooks/gateway.py): importing httpx,
pydantic and anyio took most of the approval round trip (bench/README.md), and a
hook that waits for one decision needs none of them. It speaks exactly the REST
and SSE endpoints of client/client.py (docs/api.md): the same paths, headers and
JSON bodies; errors are decoded by the one decoder (ApiError.from_parts), events
by the one SSE parser and cursor (client/sse.py), and the answers stay the JSON
objects the protocol reads (tests/client/test_wire_decoding.py checks the fields
it reads against the wire models).

Only what the hook needs: JSON requests and one event stream, HTTP and HTTPS
(``ssl`` is imported only for an https URL), one connection per request. No
proxies: the hook talks to AGENTMAIL_URL directly.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mailui4agents.client import asking
from mailui4agents.client.asking import TIMEOUT, Failed, Outcome, Pending
from mailui4agents.client.backoff import Backoff
from mailui4agents.client.errors import ApiError, GatewayUnreachable, not_an_event_stream
from mailui4agents.client.sse import Cursor, SSEParser, stream_headers
from mailui4agents.domain.json_types import JsonObject

API = "/api/v1"
# The same limits as the httpx client (client/transport.py, client/stream.py).
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
# The gateway pings every 15 s, so a read that waits 45 s has met a dead connection.
STREAM_READ_TIMEOUT_S = 45.0
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024

clock = time.monotonic


class Headers(dict[str, str]):
    """Response headers by lower-cased name; ``get`` ignores case, as httpx's does."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class _Closed(Exception):
    """The answer was cut short or is not HTTP."""


class _Ended(_Closed):
    """The gateway closed the connection (EOF)."""


class _Connection:
    """One socket and what was read from it but not yet consumed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def fill(self, until: float) -> None:
        """Read more bytes; TimeoutError once `until` passed, _Closed at EOF."""
        remaining = until - clock()
        if remaining <= 0:
            raise TimeoutError("timed out")
        self.sock.settimeout(remaining)
        data = self.sock.recv(65536)
        if not data:
            raise _Ended("the gateway closed the connection")
        self.buffer += data

    def head(self, until: float) -> tuple[int, str, Headers]:
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise _Closed("the answer's header is too large")
            self.fill(until)
        raw, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise _Closed(f"not an HTTP answer: {status_line[:80]!r}")
        headers = Headers()
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(parts[1]), parts[2] if len(parts) > 2 else "", headers

    def take_chunk(self) -> bytes | None:
        """The next chunk of a chunked body if it is whole in the buffer (b"" for
        the last one), else None."""
        line_end = self.buffer.find(b"\r\n")
        if line_end < 0:
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise _Closed("a malformed chunk")
            return None
        try:
            size = int(self.buffer[:line_end].split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _Closed("a malformed chunk") from None
        if size > MAX_BODY_BYTES:
            raise _Closed("a chunk too large")
        end = line_end + 2 + size + 2
        if len(self.buffer) < end:
            return None
        data = self.buffer[line_end + 2 : line_end + 2 + size]
        self.buffer = self.buffer[end:]
        return data

    def chunk(self, until: float) -> bytes:
        """The next chunk of a chunked body (b"" for the last one), reading as needed."""
        while (data := self.take_chunk()) is None:
            self.fill(until)
        return data

    def body(self, headers: Headers, until: float) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            total = 0
            while part := self.chunk(until):
                total += len(part)
                if total > MAX_BODY_BYTES:
                    raise _Closed("the answer is too large")
                parts.append(part)
            return b"".join(parts)
        length = headers.get("content-length")
        if length is not None:
            size = int(length)
            if size > MAX_BODY_BYTES:
                raise _Closed("the answer is too large")
            while len(self.buffer) < size:
                self.fill(until)
            return self.buffer[:size]
        while True:  # Connection: close, no length: the body ends at EOF
            try:
                self.fill(until)
            except _Ended:
                return self.buffer
            if len(self.buffer) > MAX_BODY_BYTES:
                raise _Closed("the answer is too large")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Gateway:
    """The agent's side of the gateway over blocking sockets. ``abort`` (from any
    thread) ends a wait at once: the bridge's in-process gate cancels with it."""

    def __init__(self, url: str, credential: str | None, agent_name: str | None = None) -> None:
        self.url = url
        self.tls, self.host, self.port, self.prefix = split_url(url)
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.tls else 80
        self.host_header = host if self.port == default_port else f"{host}:{self.port}"
        self.headers = {"Accept": "application/json"}
        if credential:
            self.headers["Authorization"] = f"Bearer {credential}"
        if agent_name and credential:
            self.headers["X-Agent-Name"] = agent_name
        self.aborted = threading.Event()
        self._open: set[_Connection] = set()
        self._lock = threading.Lock()

    # -- connections ----------------------------------------------------------------------

    def _connect(self, until: float) -> _Connection:
        if self.aborted.is_set():
            raise GatewayUnreachable(self.url, ConnectionAbortedError("aborted"))
        timeout = min(max(until - clock(), 0.001), CONNECT_TIMEOUT_S)
        # An ASCII host as bytes: a str would load the idna codec (and unicodedata).
        host: str | bytes = self.host.encode() if self.host.isascii() else self.host
        # (getaddrinfo takes bytes; typeshed says str only)
        sock = socket.create_connection((host, self.port), timeout=timeout)  # type: ignore[arg-type]
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            import ssl  # only for https: a local gateway's hook never pays for it

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        connection = _Connection(sock)
        with self._lock:
            self._open.add(connection)
        return connection

    def _release(self, connection: _Connection) -> None:
        with self._lock:
            self._open.discard(connection)
        connection.close()

    def abort(self) -> None:
        """End every wait and call now (callable from another thread)."""
        self.aborted.set()
        with self._lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    def _request_bytes(
        self, method: str, path: str, body: bytes | None, extra: Mapping[str, str]
    ) -> bytes:
        lines = [f"{method} {self.prefix}{API}{path} HTTP/1.1", f"Host: {self.host_header}"]
        headers = {**self.headers, **extra, "Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
            headers["Content-Length"] = str(len(body))
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    # -- REST -----------------------------------------------------------------------------

    def call(self, method: str, path: str, payload: Any = None, *, until: float) -> Any:
        """One JSON call. Raises ApiError for a non-2xx answer, GatewayUnreachable
        when the gateway cannot be reached, TimeoutError once `until` passed."""
        given, until = until, min(until, clock() + REQUEST_TIMEOUT_S)
        body = None if payload is None else json.dumps(payload).encode()
        connected = False
        try:
            connection = self._connect(until)
            connected = True
            try:
                connection.sock.sendall(self._request_bytes(method, path, body, {}))
                status, reason, headers = connection.head(until)
                content = connection.body(headers, until)
            finally:
                self._release(connection)
        except TimeoutError as exc:
            if self.aborted.is_set():
                raise GatewayUnreachable(self.url, ConnectionAbortedError("aborted")) from None
            if clock() < given:  # the request's own limit, not the caller's deadline
                raise GatewayUnreachable(self.url, exc, connected=connected) from exc
            raise
        except (OSError, _Closed, ValueError) as exc:
            raise GatewayUnreachable(self.url, exc, connected=connected) from exc
        if not 200 <= status < 300:
            raise ApiError.from_parts(status, reason, content, headers)
        if status == 204 or not content:
            return None
        try:
            return json.loads(content)
        except ValueError as exc:
            message = f"{method} {path} answered {status} with a non-JSON body"
            raise ApiError(status, "invalid_response", message) from exc

    def call_object(
        self, method: str, path: str, payload: Any = None, *, until: float
    ) -> JsonObject:
        data = self.call(method, path, payload, until=until)
        if not isinstance(data, dict):
            raise ApiError(None, "invalid_response", f"expected a JSON object, got {data!r:.200}")
        return data

    def get_permission(self, request_id: str, *, until: float) -> JsonObject:
        return self.call_object("GET", f"/agent/permissions/{quote(request_id)}", until=until)

    def request_permission(
        self,
        session_id: str,
        relay_key: str,
        *,
        until: float,
        kind: str = "approval",
        tool_name: str | None = None,
        tool_input: JsonObject | None = None,
        summary: str | None = None,
        timeout_s: int | None = None,
        rules_file_sha256: str | None = None,
        sandbox: str | None = None,
    ) -> JsonObject:
        """``POST /agent/permissions``, the body AsyncClient.request_permission sends
        (``sandbox``: "proven" when the bridge proved this turn's sandbox)."""
        values = {
            "session_id": session_id, "kind": kind, "relay_key": relay_key,
            "tool_name": tool_name, "tool_input": tool_input, "summary": summary,
            "timeout_s": timeout_s, "rules_file_sha256": rules_file_sha256,
            "sandbox": sandbox,
        }  # fmt: skip
        body = {name: value for name, value in values.items() if value is not None}
        return self.call_object("POST", "/agent/permissions", body, until=until)

    def withdraw(self, relay_key_prefix: str, *, until: float) -> list[str]:
        """``POST /agent/permissions/withdraw``: the ids of the requests closed as
        answered in the terminal."""
        body = {"relay_key_prefix": relay_key_prefix}
        data = self.call_object("POST", "/agent/permissions/withdraw", body, until=until)
        ids = data.get("withdrawn")
        return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []

    def waiting(
        self,
        session_id: str,
        kind: str,
        message: str,
        excerpt: str | None,
        turn: str,
        *,
        until: float,
    ) -> bool:
        """``POST /agent/sessions/{id}/waiting``: True when this turn's notice
        was sent before (deduplicated)."""
        body = {"kind": kind, "message": message, "turn": turn}
        if excerpt:
            body["excerpt"] = excerpt
        path = f"/agent/sessions/{quote(session_id)}/waiting"
        data = self.call_object("POST", path, body, until=until)
        return data.get("deduplicated") is True

    def interactive_session(
        self, platform_id: str, owner: str, cwd: str, title: str | None, *, until: float
    ) -> str:
        """``POST /agent/sessions/interactive``: the id of the bound mail session."""
        body = {"platform_id": platform_id, "owner": owner, "cwd": cwd}
        if title is not None:
            body["title"] = title
        data = self.call_object("POST", "/agent/sessions/interactive", body, until=until)
        session_id = data.get("id")
        if not isinstance(session_id, str) or not session_id:
            raise ApiError(None, "invalid_response", "the interactive session has no id")
        return session_id

    def events(self) -> EventStream:
        return EventStream(self)


def split_url(url: str) -> tuple[bool, str, int, str]:
    """(TLS?, host, port, path prefix) of an http(s) base URL. By hand: importing
    urllib.parse (and ipaddress with it) costs the hook more than this."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"AGENTMAIL_URL must be an http(s) URL, not {url!r}")
    netloc, slash, path = rest.partition("/")
    path = (slash + path).split("?", 1)[0].split("#", 1)[0].rstrip("/")
    if "@" in netloc:
        raise ValueError(f"AGENTMAIL_URL must not carry credentials: {url!r}")
    if netloc.startswith("["):
        host, _, after = netloc[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else after
    else:
        host, _, port_text = netloc.partition(":")
    if not host or (port_text and not port_text.isdigit()):
        raise ValueError(f"AGENTMAIL_URL has no valid host and port: {url!r}")
    tls = scheme == "https"
    return tls, host, int(port_text) if port_text else (443 if tls else 80), path


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def quote(value: str) -> str:
    """One path segment, percent-encoded (as ``urllib.parse.quote(value, safe="")``)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in value.encode())


class EventStream:
    """The agent's event stream (``GET /agent/events``), read on demand: each
    :meth:`receive` returns the next message of client/asking.py's
    :class:`~mailui4agents.client.asking.Receive`, reconnecting with backoff and
    Last-Event-ID like client/stream.py (which shares the cursor)."""

    def __init__(self, gateway: Gateway, backoff: Backoff | None = None) -> None:
        self.gateway = gateway
        self.backoff = backoff or Backoff()
        self.cursor = Cursor(None)
        self._connection: _Connection | None = None
        self._parser = SSEParser()
        self._chunked = True
        self._queue: list[asking.Message] = []
        self._reconnect_at = 0.0
        self._failed: bool = False  # a permanent refusal was reported

    def close(self) -> None:
        if self._connection is not None:
            self.gateway._release(self._connection)
            self._connection = None

    def receive(self, until: float) -> asking.Message | None:
        while True:
            if self._queue:
                return self._queue.pop(0)
            if self.gateway.aborted.is_set() or self._failed:
                # Nothing more will come: aborted at once, refused at the deadline.
                self.gateway.aborted.wait(max(until - clock(), 0.0))
                return None
            if self._connection is None:
                now = clock()
                if now < self._reconnect_at:
                    if self.gateway.aborted.wait(min(self._reconnect_at, until) - now):
                        continue
                    if clock() >= until:
                        return None
                    continue
                self._open(until)
                continue
            try:
                self._read(until)
            except TimeoutError:
                if self.gateway.aborted.is_set():
                    self._lost(
                        GatewayUnreachable(self.gateway.url, ConnectionAbortedError("aborted"))
                    )
                    continue
                if clock() >= until:
                    return None
                self._lost(
                    GatewayUnreachable(self.gateway.url, TimeoutError("no ping"), connected=True)
                )
            except _Ended:
                self._lost(None)  # a stream that simply ended
            except (OSError, _Closed, ValueError) as exc:
                self._lost(GatewayUnreachable(self.gateway.url, exc, connected=True))

    def _open(self, until: float) -> None:
        gateway = self.gateway
        extra = stream_headers(self.cursor.resume)
        connection: _Connection | None = None
        # Never past the caller's deadline: a gateway that swallows the connect
        # must not hold the hook beyond its wait (platforms fail open on a kill).
        limit = min(until, clock() + CONNECT_TIMEOUT_S)
        try:
            connection = gateway._connect(limit)
            connection.sock.sendall(gateway._request_bytes("GET", "/agent/events", None, extra))
            status, reason, headers = connection.head(limit)
            if status != 200:
                content = connection.body(headers, limit)
                gateway._release(connection)
                failure = ApiError.from_parts(status, reason, content, headers)
                if failure.permanent:
                    self._failed = True
                    self._queue.append(("error", failure))
                else:
                    self._retry(failure)
                return
            refused = not_an_event_stream(status, gateway.url, headers.get("content-type", ""))
            if refused is not None:
                gateway._release(connection)
                self._failed = True
                self._queue.append(("error", refused))
                return
        except (OSError, _Closed, ValueError) as exc:
            if connection is not None:
                gateway._release(connection)
            self._retry(GatewayUnreachable(gateway.url, exc))
            return
        self._connection = connection
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._parser = SSEParser()
        # The gateway fixed this stream's start before answering 200: anything
        # committed from now on will be delivered.
        self._queue.append(("connected", None))
        if connection.buffer:
            try:
                self._consume(connection)
            except _Closed as exc:  # as a later read's failure would be
                self._lost(GatewayUnreachable(gateway.url, exc, connected=True))

    def _read(self, until: float) -> None:
        """Wait for data until `until` (at most the read timeout) and parse it."""
        assert self._connection is not None
        limit = min(until, clock() + STREAM_READ_TIMEOUT_S)
        if self._chunked:
            data = self._connection.chunk(limit)
            if not data:
                raise _Ended("the gateway closed the connection")
            self._feed(data)
        else:
            self._connection.fill(limit)
            self._consume(self._connection)

    def _consume(self, connection: _Connection) -> None:
        """Parse what is already buffered (whole chunks only, when chunked)."""
        if self._chunked:
            while data := connection.take_chunk():
                self._feed(data)
            return
        data, connection.buffer = connection.buffer, b""
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        self.backoff.reset()  # the connection works; start over next time
        for sse in self._parser.feed(data):
            event = self.cursor.accept(sse)
            if event is not None and event[1] == asking.DECISION_EVENT:
                self._queue.append(("decision", event[2]))
        self.cursor.moved(self._parser)
        self.backoff.follow(self._parser.retry)

    def _lost(self, failure: ApiError | None) -> None:
        self.close()
        self._retry(failure)

    def _retry(self, failure: ApiError | None) -> None:
        delay = self.backoff.next_delay()
        if failure is not None and failure.retry_after is not None:
            delay = max(delay, failure.retry_after)
        self._reconnect_at = clock() + delay
        self._queue.append(("retry", failure))


SyncPost = Callable[[float], Mapping[str, Any]]


class Asker:
    """One ask over blocking sockets: ``with Asker(gateway) as asker`` opens the
    agent's stream; ``opened``, ``post`` and ``wait`` are the protocol's three
    steps (client/asking.py), as in client/waiting.py's anyio driver."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.stream = gateway.events()

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()

    def _run(self, steps: asking.Steps, post: SyncPost | None = None) -> Any:
        try:
            command = next(steps)
            while True:
                command = steps.send(self._do(command, post))
        except StopIteration as done:
            return done.value

    def _do(self, command: asking.Command, post: SyncPost | None) -> Any:
        if isinstance(command, asking.Receive):
            return self.stream.receive(command.until)
        try:
            if isinstance(command, asking.Post):
                assert post is not None
                return post(max(command.until - clock(), 0.0))
            return self.gateway.get_permission(command.request_id, until=command.until)
        except ApiError as exc:
            return exc
        except TimeoutError:
            return TIMEOUT

    def opened(self, within: float) -> Failed | None:
        result: Failed | None = self._run(asking.opening(within, clock))
        return result

    def post(self, post: SyncPost, key: str, deadline: float) -> Pending | Outcome:
        result: Pending | Outcome = self._run(asking.posting(key, deadline), post)
        return result

    def wait(self, pending: Pending, deadline: float) -> Outcome:
        result: Outcome = self._run(asking.waiting(pending, deadline, clock))
        return result
