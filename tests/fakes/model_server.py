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
so a test can assert what the model was told (:mod:`tests.fakes.http_fake`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from tests.fakes.http_fake import Answer, HttpFake, Reply, Sse

__all__ = ["ModelServer", "Reply", "answer", "bash_then_answer", "fail_with", "hang"]


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


class ModelServer(HttpFake):
    """Serve ``script`` on 127.0.0.1 (port chosen by the OS) in a thread."""

    answers_head = True

    def __init__(self, script: Script) -> None:
        super().__init__()
        self.script = script

    def not_found(self, path: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "not_found_error"}}

    def handle(self, path: str, body: dict[str, Any]) -> Answer:
        if not path.startswith("/v1/messages") or "count_tokens" in path:
            return None
        reply = self.script(body)
        if reply.hang or reply.status != 200:
            return reply
        if body.get("stream"):
            return Sse(list(_events(body, reply)))
        return _message(body, reply)

    def messages_requests(self) -> list[dict[str, Any]]:
        return self.requests_where(lambda path: path.startswith("/v1/messages"))

    def told(self) -> str:
        """Everything the model was sent, as one string (for `in` checks)."""
        return "\n".join(json.dumps(r["body"]) for r in self.messages_requests())


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
