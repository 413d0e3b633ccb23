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
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.fakes.http_fake import Answer, HttpFake, Reply, Sse

__all__ = ["ChatServer", "Reply", "answer", "fail_with", "hang", "shell_then_answer"]

SHELL_TOOLS = ("bash", "Bash", "shell", "run_shell_command", "execute")


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


class ChatServer(HttpFake):
    """Serve ``script`` on 127.0.0.1 (port chosen by the OS) in a thread. Its
    :attr:`url` is the base clients append ``/chat/completions`` to (``…/v1``)."""

    url_suffix = "/v1"

    def __init__(self, script: Script) -> None:
        super().__init__()
        self.script = script

    def not_found(self, path: str) -> dict[str, Any]:
        return {"error": {"message": "not found", "type": "not_found"}}

    def get(self, path: str) -> dict[str, Any] | None:
        if path.rstrip("/").endswith("/models"):
            return {"object": "list", "data": [
                {"id": "fake-model", "object": "model", "owned_by": "fake"}]}  # fmt: skip
        return None

    def handle(self, path: str, body: dict[str, Any]) -> Answer:
        if not path.split("?")[0].endswith("/chat/completions"):
            return None
        reply = self.script(body)
        if reply.hang or reply.status != 200:
            return reply
        if body.get("stream"):
            frames: list[tuple[str | None, dict[str, Any]]] = [
                (None, chunk) for chunk in _chunks(body, reply)
            ]
            return Sse(frames, trailer=b"data: [DONE]\n\n")
        return _completion(body, reply)

    def chat_requests(self) -> list[dict[str, Any]]:
        return self.requests_where(lambda path: path.endswith("/chat/completions"))

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
