"""What every request passes before any route sees it (a pure ASGI middleware).

- Request bodies have a size limit, enforced before reading: a declared
  Content-Length over it is refused at once (413, nothing read), and a body
  without one is counted as it arrives and refused at the first byte too many.
  Before this, 4 × 200 MB bodies to the unauthenticated login took the gateway
  from 248 MB to 2 GB. JSON routes get a small limit; the upload routes the
  attachment limit, and they read their body only after authentication.
- JSON bodies are strict (domain/strict_json.py): the problems Python's parser
  lets through become 400s naming the field, in the one error shape.
- Query parameters and path parameters hold no NUL (SQLite and FTS cannot
  search for one, PostgreSQL text cannot hold one: a NUL in a path id was a 500
  there). JSON text neither (domain/strict_json.py).

Starlette's RequestBodyLimitMiddleware counts too, but answers in plain text
where a route did not raise, and takes its per-route limit at declaration time;
ours come from settings.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailui4agents.domain import strict_json
from mailui4agents.errors import ApiError

_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})


def too_large(limit: int, what: str = "the request body") -> ApiError:
    return ApiError(
        413, "too_large", f"{what} is larger than {limit} bytes", field="body", limit=limit
    )


async def reply(send: Send, err: ApiError, *, close: bool = False) -> None:
    """Answer with `err` in the error shape; `close` when a body is left unread, so
    the client does not go on sending it into a connection we will not read."""
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return bytes(v)
    return None


def _query_problem(scope: Scope) -> ApiError | None:
    qs = scope.get("query_string", b"")
    if b"%00" not in qs and b"\x00" not in qs:
        return None
    for key, value in parse_qsl(qs.decode("latin-1"), keep_blank_values=True):
        if "\x00" in key or "\x00" in value:
            field = key.replace("\x00", "\\0")
            return ApiError(
                400, "invalid_value", f'query parameter "{field}" holds a NUL', field=field
            )
    return None


def _path_problem(scope: Scope) -> ApiError | None:
    """A NUL in the path: named by the documented path parameter that holds it
    (the OpenAPI document's templates: the routes are not matched yet), else "path"."""
    path = scope["path"]
    if "\x00" not in path:
        return None
    field = "path"
    for pattern in _templates(scope.get("app")):
        m = pattern.fullmatch(path)
        if m is not None:
            field = next((k for k, v in m.groupdict().items() if "\x00" in v), field)
            break
    return ApiError(400, "invalid_value", f'path parameter "{field}" holds a NUL', field=field)


_TEMPLATES: weakref.WeakKeyDictionary[Any, list[re.Pattern[str]]] = weakref.WeakKeyDictionary()


def _templates(app: Any) -> list[re.Pattern[str]]:
    """The app's documented paths as patterns, `{name}` a group (built once per app)."""
    if not hasattr(app, "openapi"):
        return []
    if app not in _TEMPLATES:
        _TEMPLATES[app] = [
            re.compile(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(p)))
            for p in app.openapi().get("paths", {})
        ]
    return _TEMPLATES[app]


def _is_json(content_type: bytes | None) -> bool:
    # The same rule as FastAPI's: no content type, application/json or +json.
    if content_type is None:
        return True
    mime = content_type.split(b";", 1)[0].strip().lower()
    return mime == b"application/json" or (
        mime.startswith(b"application/") and mime.endswith(b"+json")
    )


class BodyGuard:
    """`json_max`: the limit of every body; `streamed`: path → limit of the routes
    that read their body as a stream (uploads), after authenticating."""

    def __init__(self, app: ASGIApp, *, json_max: int, streamed: Mapping[str, int]) -> None:
        self.app = app
        self.json_max = json_max
        self.streamed = dict(streamed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _query_problem(scope) or _path_problem(scope)
        if problem is not None:
            await reply(send, problem)
            return
        limit = self.streamed.get(scope["path"], self.json_max)
        length = _header(scope, b"content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        if declared is not None and declared > limit:
            await reply(send, too_large(limit), close=True)
            return
        chunked = _header(scope, b"transfer-encoding") is not None
        if not declared and not chunked and scope["method"] in _NO_BODY:
            await self.app(scope, receive, send)
        elif scope["path"] in self.streamed:
            await self.app(scope, _counting(receive, limit), send)
        else:
            await self._buffered(scope, receive, send, limit)

    async def _buffered(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            body += message.get("body", b"")
            if len(body) > limit:
                await reply(send, too_large(limit), close=True)
                return
            if not message.get("more_body", False):
                break
        if body and _is_json(_header(scope, b"content-type")):
            try:
                strict_json.loads(bytes(body))
            except strict_json.JsonProblem as e:
                await reply(send, ApiError(400, "invalid_value", e.message, field=e.field))
                return
            except json.JSONDecodeError:
                pass  # not JSON at all: the body models answer that (invalid_type "body")
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # later calls wait for the disconnect

        await self.app(scope, replay, send)


def _counting(receive: Receive, limit: int) -> Receive:
    total = 0

    async def counted() -> Message:
        nonlocal total
        message = await receive()
        if message["type"] == "http.request":
            total += len(message.get("body", b""))
            if total > limit:
                raise too_large(limit)  # inside the route: answered by its error handler
        return message

    return counted
