"""A scripted model server speaking the Gemini API: ``POST
/v1beta/models/M:streamGenerateContent?alt=sse`` (streaming, what Gemini CLI's
turns use) and ``M:generateContent`` (its side calls: router, next speaker).

Request: ``contents`` is the whole history (``{role: user|model, parts: [{text} |
{functionCall: {name, args}} | {functionResponse: {name, response}}]}``),
``tools`` are ``[{functionDeclarations: [{name, parameters | parametersJsonSchema}]}]``
(the shell is ``run_shell_command`` with ``command`` and ``description``). Each SSE
frame is a ``GenerateContentResponse``; errors are ``{"error": {code, message, status}}``.
A side call asking for JSON (``responseMimeType: application/json``) gets an object
that fits its schema, so the CLI's router and checks go on quietly.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.http_fake import Reply
from tests.fakes.scripted_http import ScriptedServer, Seen, SeenScript, Sse

__all__ = ["GeminiServer", "bad_key", "seen"]


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error", "content", "result"):
            if key in response:
                value = response[key]
                return value if isinstance(value, str) else json.dumps(value)
        return json.dumps(response)
    return str(response)


def seen(body: dict[str, Any]) -> Seen:
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    results: list[str] = []
    if contents:
        for part in contents[-1].get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                results.append(_response_text(part["functionResponse"].get("response")))
    tools: dict[str, dict[str, Any]] = {}
    for group in body.get("tools") or []:
        for decl in (group or {}).get("functionDeclarations") or []:
            schema = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
            tools[str(decl.get("name"))] = dict(schema)
    return Seen(body, results, tools)


def bad_key() -> SeenScript:
    error = {
        "error": {
            "code": 401,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "UNAUTHENTICATED",
        }
    }
    return lambda _seen: Reply(status=401, error=error)


def fits(schema: Any) -> Any:
    """A value that satisfies a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        values = list(schema["enum"])
        return "user" if "user" in values else values[0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: fits(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


def _candidate(parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return candidate


USAGE = {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25}


class GeminiServer(ScriptedServer):
    """Gemini's generateContent routes under ``/v1beta/models/``."""

    def is_model_request(self, path: str) -> bool:
        return ":streamGenerateContent" in path

    def handle(self, path: str, body: dict[str, Any]) -> Reply | Sse | dict[str, Any] | None:
        route = path.split("?", 1)[0]
        if "/models/" not in route:
            return None
        model = route.rsplit("/", 1)[-1].split(":", 1)[0]
        if route.endswith(":countTokens"):
            return {"totalTokens": 10}
        if route.endswith(":generateContent"):
            config = body.get("generationConfig") or {}
            if config.get("responseMimeType") == "application/json":
                schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
                text = json.dumps(fits(schema))
            else:
                text = "ok"
            return {"candidates": [_candidate([{"text": text}], True)], "usageMetadata": USAGE,
                    "modelVersion": model}  # fmt: skip
        if not route.endswith(":streamGenerateContent"):
            return None
        reply = self.answer_for(seen(body))
        if reply.hang or reply.status != 200:
            return reply
        if reply.tool is not None:
            name, args = reply.tool
            parts: list[dict[str, Any]] = [{"functionCall": {"name": name, "args": args}}]
            frames = [_candidate(parts, True)]
        else:
            frames = [_candidate([{"text": reply.text or ""}], True)]
        return Sse(
            [(None, {"candidates": [c], "usageMetadata": USAGE, "modelVersion": model})
             for c in frames]
        )  # fmt: skip
