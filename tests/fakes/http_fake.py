"""The HTTP side every scripted model server shares, whatever protocol it speaks.

A real HTTP/1.1 server on 127.0.0.1 (port chosen by the OS) in a thread. Every
request is logged (method, path, headers, JSON body) in :attr:`HttpFake.requests`.
A subclass answers each POST with :meth:`HttpFake.handle` (and a GET with
:meth:`HttpFake.get`): JSON, server-sent events (:class:`Sse`), an error or a
hang (:class:`Reply`), or None for the protocol's own 404.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    """One answer: text, a tool call, an HTTP error, or nothing (hang)."""

    text: str | None = None
    tool: tuple[str, dict[str, Any]] | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass
class Sse:
    """Server-sent events to write: ``(event name or None, JSON data)``, then
    `trailer` as is (Chat Completions ends with ``data: [DONE]``)."""

    frames: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    trailer: bytes = b""


Answer = Reply | Sse | dict[str, Any] | None


class HttpFake(ABC):
    """Serve on 127.0.0.1 in a thread; use as a context manager."""

    #: Appended to the server's address in :attr:`url` (``/v1`` for Chat Completions).
    url_suffix = ""
    #: Answer HEAD with an empty 200 (the Anthropic SDK probes with HEAD).
    answers_head = False

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                if not server.answers_head:
                    self.send_error(501)
                    return
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                server._log(self, None)
                found = server.get(self.path)
                if found is None:
                    self._json(404, server.not_found(self.path))
                else:
                    self._json(200, found)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                server._log(self, body)
                handled = server.handle(self.path, body if isinstance(body, dict) else {})
                if handled is None:
                    self._json(404, server.not_found(self.path))
                elif isinstance(handled, Reply):  # an error or a hang
                    if handled.hang:
                        server._stop.wait()
                        return
                    self._json(handled.status, handled.error or {}, handled.headers)
                elif isinstance(handled, Sse):
                    self._sse(handled)
                else:
                    self._json(200, handled)

            def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _sse(self, sse: Sse) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in sse.frames:
                    head = f"event: {event}\n" if event else ""
                    self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
                self.wfile.write(sse.trailer)
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @abstractmethod
    def handle(self, path: str, body: dict[str, Any]) -> Answer:
        """The answer to one POST: an error/hang Reply, SSE frames, JSON, or None (404)."""

    def get(self, path: str) -> dict[str, Any] | None:
        """The JSON answer to a GET, or None (404)."""
        return None

    def not_found(self, path: str) -> dict[str, Any]:
        """The protocol's 404 body."""
        return {"error": {"message": f"no route {path}", "code": 404}}

    def _log(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        with self._lock:
            self.requests.append(
                {
                    "method": handler.command,
                    "path": handler.path,
                    "headers": dict(handler.headers.items()),
                    "body": body,
                }
            )

    def requests_where(self, path_matches: Callable[[str], bool]) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if path_matches(str(r["path"]))]

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.url_suffix}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
