"""What every scripted model server shares, whatever protocol it speaks.

The Anthropic server (:mod:`tests.fakes.model_server`) came first; the OpenAI
Responses (:mod:`tests.fakes.responses_server`) and Gemini
(:mod:`tests.fakes.gemini_server`) servers reuse its :class:`Reply` and the
same script structure, over a protocol-neutral view of each request
(:class:`Seen`): the results of the tool calls that the *last* message
carries (empty when the last message is not a tool result) and the tools
offered. The CLIs are stateless towards the model — every resumed turn resends
the whole history — so a script only ever looks at one request.

- :func:`shell_then_answer` — "run X in the shell tool, then answer Y (quoting
  what the tool said, so a test sees what the model was told)".
- :func:`answer`, :func:`fail_with`, :func:`hang` — as in model_server.

The server itself is a real HTTP server on 127.0.0.1, port chosen by the OS,
in a thread; every request is logged (method, path, headers, JSON body).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.model_server import Reply

__all__ = ["Reply", "ScriptedServer", "Seen", "answer", "fail_with", "hang", "shell_then_answer"]


@dataclass(frozen=True)
class Seen:
    """One request, read the same way for every protocol."""

    body: dict[str, Any]
    tool_results: list[str]  # what the tools said, when the last message is tool results
    tools: dict[str, dict[str, Any]]  # offered tool name -> its JSON-schema parameters


SeenScript = Callable[[Seen], Reply]

#: Shell tools by the names the CLIs give them (Codex, Gemini CLI, Claude-shaped).
SHELL_TOOLS = ("exec_command", "shell", "run_shell_command", "Bash", "bash")


def shell_call(tools: dict[str, dict[str, Any]], command: str) -> tuple[str, dict[str, Any]] | None:
    """A call of the first shell tool offered, its argument named as its schema says."""
    for name in SHELL_TOOLS:
        if name not in tools:
            continue
        properties = tools[name].get("properties") or {}
        key = "cmd" if "cmd" in properties else "command"
        value: Any = command
        if (properties.get(key) or {}).get("type") == "array":
            value = ["bash", "-lc", command]
        args: dict[str, Any] = {key: value}
        if "description" in properties:
            args["description"] = "write marker file"
        return name, args
    return None


def shell_then_answer(command: str, text: str) -> SeenScript:
    def script(seen: Seen) -> Reply:
        if seen.tool_results:
            return Reply(text=f"{text} [tool said: {' | '.join(seen.tool_results)}]")
        call = shell_call(seen.tools, command)
        if call is not None:
            return Reply(tool=call)
        return Reply(text=text)

    return script


def answer(text: str) -> SeenScript:
    return lambda _seen: Reply(text=text)


def fail_with(status: int, error: dict[str, Any]) -> SeenScript:
    return lambda _seen: Reply(status=status, error=error)


def hang() -> SeenScript:
    return lambda _seen: Reply(hang=True)


@dataclass
class Sse:
    """Server-sent events to write: ``(event name or None, JSON data)``."""

    frames: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)


class ScriptedServer(ABC):
    """Serve ``script`` on 127.0.0.1 in a thread; subclasses speak one protocol."""

    def __init__(self, script: SeenScript) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._log(self, None)
                self._json(404, {"error": {"message": "not found", "code": 404}})

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
                    self._json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
                    return
                if isinstance(handled, Reply):  # an error or a hang
                    if handled.hang:
                        server._stop.wait()
                        return
                    self._json(handled.status, handled.error or {}, handled.headers)
                    return
                if isinstance(handled, Sse):
                    self._sse(handled)
                    return
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
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @abstractmethod
    def handle(self, path: str, body: dict[str, Any]) -> Reply | Sse | dict[str, Any] | None:
        """The answer to one POST: an error/hang Reply, SSE frames, JSON, or None (404)."""

    def answer_for(self, seen: Seen) -> Reply:
        return self.script(seen)

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

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def model_requests(self) -> list[dict[str, Any]]:
        """The requests that asked the model for an answer (the protocol's main route)."""
        with self._lock:
            return [r for r in self.requests if self.is_model_request(str(r["path"]))]

    @abstractmethod
    def is_model_request(self, path: str) -> bool: ...

    def told(self) -> str:
        """Everything the model was sent, as one string (for `in` checks)."""
        return "\n".join(json.dumps(r["body"]) for r in self.model_requests())

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
