"""A scripted model server: OpenAI Chat Completions on 127.0.0.1, streaming SSE.

The protocol opencode (``@ai-sdk/openai-compatible``) and pi (``openai-completions``)
speak. Like :mod:`tests.fakes.model_server` (Anthropic), a *script* decides each
answer from the request, statelessly: every resumed turn resends the whole history.

- :func:`shell_then_answer` — when the last message is a tool result, answer text
  (quoting the tool result, so a test sees what the model was told); otherwise,
  when a shell tool is offered (``bash`` or ``shell``), call it with the command
  (the argument names are read from the tool's JSON schema); otherwise answer.
- :func:`answer` — always the same text.
- :func:`fail_with` — an HTTP error (401 bad key, 429 quota, ...).
- :func:`hang` — never answer (until the server stops).

``POST /v1/chat/completions`` (also ``/chat/completions``) streams when the body
says ``stream: true`` (chunks, an optional usage chunk, ``data: [DONE]``) and
answers one JSON object otherwise. ``GET /v1/models`` lists ``fake-model``.
Every request is logged (method, path, headers, JSON body) in :attr:`requests`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SHELL_TOOLS = ("bash", "Bash", "shell", "run_shell_command", "execute")


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


def message_text(message: dict[str, Any]) -> str:
    """A message's content as text (string content or a list of text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def tools_offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name → its JSON schema (``parameters``)."""
    found: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            found[function["name"]] = params if isinstance(params, dict) else {}
    return found


def shell_arguments(schema: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments for a shell tool: the command under its own name, and every other
    required string filled in (opencode's bash requires a description)."""
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(props, dict)
    name = next((n for n in ("command", "cmd") if n in props), "command")
    spec = props.get(name) if isinstance(props.get(name), dict) else {}
    arguments: dict[str, Any] = {
        name: [command] if isinstance(spec, dict) and spec.get("type") == "array" else command
    }
    for required in schema.get("required") or []:
        if required not in arguments:
            arguments[required] = "run it"
    return arguments


def shell_then_answer(command: str, answer: str) -> Script:
    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            told = " | ".join(
                message_text(m) for m in reversed(messages) if m.get("role") == "tool"
            )
            return Reply(text=f"{answer} [tool said: {told}]")
        tools = tools_offered(body)
        shell = next((n for n in SHELL_TOOLS if n in tools), None)
        if shell is not None:
            return Reply(tool=(shell, shell_arguments(tools[shell], command)))
        return Reply(text=answer)

    return script


def answer(text: str) -> Script:
    return lambda _body: Reply(text=text)


def fail_with(status: int, error_type: str, message: str) -> Script:
    error = {"error": {"message": message, "type": error_type, "code": error_type}}
    return lambda _body: Reply(status=status, error=error, headers={"x-should-retry": "false"})


def hang() -> Script:
    return lambda _body: Reply(hang=True)


class ChatServer:
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

            def do_GET(self) -> None:
                server._log(self, None)
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [
                        {"id": "fake-model", "object": "model", "owned_by": "fake"}]})  # fmt: skip
                    return
                self._json(404, {"error": {"message": "not found", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                server._log(self, body)
                if not self.path.split("?")[0].endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found", "type": "not_found"}})
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
                    self._json(200, _completion(body, reply))

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
                for chunk in _chunks(body, reply):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
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
        """The base URL clients append ``/chat/completions`` to (``…/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if str(r["path"]).endswith("/chat/completions")]

    def told(self) -> str:
        """Everything the model was sent, as one string (for `in` checks)."""
        return "\n".join(json.dumps(r["body"]) for r in self.chat_requests())

    def tool_results(self) -> list[str]:
        """The text of every tool result the model was sent."""
        found: list[str] = []
        for request in self.chat_requests():
            for message in request["body"].get("messages") or []:
                if message.get("role") == "tool":
                    found.append(message_text(message))
        return found

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def _base(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
    }


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or ""}
    finish = "stop"
    if reply.tool is not None:
        name, arguments = reply.tool
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": _call_id(), "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}]}  # fmt: skip
        finish = "tool_calls"
    return {
        **_base(body),
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


def _chunks(body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    base = {**_base(body), "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.tool is not None:
        name, arguments = reply.tool
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": _call_id(),
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        chunks.append(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(arguments)}}]})
        )
        chunks.append(chunk({}, "tool_calls"))
    else:
        chunks.append(chunk({"content": reply.text or ""}))
        chunks.append(chunk({}, "stop"))  # fmt: skip
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": USAGE})
    return chunks


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"
