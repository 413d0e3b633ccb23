"""A scripted model server speaking the OpenAI Responses API (``POST /v1/responses``,
streaming SSE), the only wire protocol Codex 0.171 accepts (``wire_api = "responses"``).

Request, as Codex sends it: ``input`` is the whole history, a list of items
(``message`` with ``input_text`` parts, ``function_call``, ``function_call_output``
``{call_id, output}``); ``tools`` are ``{"type": "function", "name", "parameters"}``
(the shell is ``exec_command`` with a ``cmd`` string). The answer is a stream of
``response.created``, ``response.output_item.added``/``.done`` per item and
``response.completed``; errors are ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.fakes.http_fake import Reply
from tests.fakes.scripted_http import ScriptedServer, Seen, SeenScript, Sse

__all__ = ["ResponsesServer", "bad_key", "seen"]


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or json.dumps(output))
    return str(output)


def seen(body: dict[str, Any]) -> Seen:
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    results: list[str] = []
    for item in reversed(items):  # the trailing run of tool outputs
        if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
            break
        results.insert(0, _output_text(item.get("output")))
    tools = {
        str(t.get("name")): dict(t.get("parameters") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type") == "function"
    }
    return Seen(body, results, tools)


def bad_key() -> SeenScript:
    error = {
        "error": {
            "message": "Incorrect API key provided: dummy.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    return lambda _seen: Reply(status=401, error=error)


class ResponsesServer(ScriptedServer):
    """``POST /v1/responses`` (any prefix before ``/responses``)."""

    def is_model_request(self, path: str) -> bool:
        return path.split("?", 1)[0].endswith("/responses")

    def handle(self, path: str, body: dict[str, Any]) -> Reply | Sse | dict[str, Any] | None:
        if not self.is_model_request(path):
            return None
        reply = self.answer_for(seen(body))
        if reply.hang or reply.status != 200:
            return reply
        response_id = f"resp_{uuid.uuid4().hex[:16]}"
        if reply.tool is not None:
            name, args = reply.tool
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "call_id": f"call_{uuid.uuid4().hex[:16]}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text or "", "annotations": []}],
            }
        model = body.get("model", "fake-model")
        base = {"id": response_id, "object": "response", "model": model, "status": "in_progress"}
        usage = {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 25,
        }
        frames: list[tuple[str | None, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": {**base, "output": []}}),
            ("response.output_item.added",
             {"type": "response.output_item.added", "output_index": 0,
              "item": {**item, "status": "in_progress"}}),
        ]  # fmt: skip
        if item["type"] == "message":
            frames.append(
                ("response.output_text.delta",
                 {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                  "content_index": 0, "delta": reply.text or ""})
            )  # fmt: skip
        frames += [
            ("response.output_item.done",
             {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed",
             {"type": "response.completed",
              "response": {**base, "status": "completed", "output": [item], "usage": usage}}),
        ]  # fmt: skip
        return Sse(frames)
