"""A scripted model server: the Anthropic Messages API on 127.0.0.1, streaming SSE.

Per test, a *script* decides each answer from the request (stateless, like
the CLIs it serves: every resumed turn resends the whole history):

- :func:`bash_then_answer` — "call Bash with X, then answer Y": when the last
  user message carries a tool result, answer text Y (quoting the tool result,
  so a test can see what the model was told); otherwise, when a Bash tool is
  offered, call it with X; otherwise answer Y.
- :func:`fail_with` — answer an HTTP error (401 bad key, 429 quota, ...).
- :func:`hang` — never answer (until the server stops).

Every request is logged (method, path, headers, JSON body) in :attr:`requests`
so a test can assert what the model was told.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One answer: text, a tool call, an HTTP error, or nothing (hang)."""

    text: str | None = None
    tool: tuple[str, dict[str, Any]] | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


Script = Callable[[dict[str, Any]], Reply]


def last_user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages") or []
    if not messages:
        return []
    content = messages[-1].get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def bash_then_answer(command: str, answer: str) -> Script:
    def script(body: dict[str, Any]) -> Reply:
        results = [b for b in last_user_content(body) if b.get("type") == "tool_result"]
        if results:
            told = " | ".join(tool_result_text(b) for b in results)
            return Reply(text=f"{answer} [tool said: {told}]")
        tools = {t.get("name") for t in body.get("tools") or []}
        if "Bash" in tools:
            return Reply(tool=("Bash", {"command": command, "description": "run it"}))
        return Reply(text=answer)

    return script


def answer(text: str) -> Script:
    return lambda _body: Reply(text=text)


def fail_with(status: int, error_type: str, message: str) -> Script:
    error = {"type": "error", "error": {"type": error_type, "message": message}}
    # x-should-retry: false keeps the SDK from retrying (a quota will not heal in seconds).
    return lambda _body: Reply(status=status, error=error, headers={"x-should-retry": "false"})


def hang() -> Script:
    return lambda _body: Reply(hang=True)


class ModelServer:
    """Serve ``script`` on 127.0.0.1 (port chosen by the OS) in a thread."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                server._log(self, None)
                self._json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                server._log(self, body)
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error"}})
                    return
                reply = server.script(body)
                if reply.hang:
                    server._stop.wait()
                    return
                if reply.status != 200:
                    self._json(reply.status, reply.error or {}, reply.headers)
                    return
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _message(body, reply))

            def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in _events(body, reply):
                    frame = f"event: {event}\ndata: {json.dumps(data)}\n\n"
                    self.wfile.write(frame.encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

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

    def messages_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if str(r["path"]).startswith("/v1/messages")]

    def told(self) -> str:
        """Everything the model was sent, as one string (for `in` checks)."""
        return "\n".join(json.dumps(r["body"]) for r in self.messages_requests())

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def _message(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    stop = "end_turn"
    if reply.tool is not None:
        name, tool_input = reply.tool
        content.append({"type": "tool_use", "id": _tool_id(), "name": name, "input": tool_input})
        stop = "tool_use"
    else:
        content.append({"type": "text", "text": reply.text or ""})
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _events(body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    message = _message(body, reply)
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    block = message["content"][0]
    if block["type"] == "text":
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": block["text"]}}),
        ]  # fmt: skip
    else:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {**block, "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta",
                                               "partial_json": json.dumps(block["input"])}}),
        ]  # fmt: skip
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return events


def _tool_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"
