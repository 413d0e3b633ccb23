"""One request, observed: its id (the `X-Request-Id` answer header), its metrics
and its one log line (docs/metrics.md, docs/api.md, "Request ids and logs").

A pure ASGI middleware, outermost of the app's own: it sees the answers of the
body guard too. The line names the route template (`/api/v1/mail/{mail_id}`),
never the path or the query string: those may hold one-time codes and tokens
(`?token=` of a one-click link), and raw paths would make every mail id a new
metric label.
"""

from __future__ import annotations

import logging
import secrets
import time
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailui4agents.metrics import UNMATCHED, GatewayMetrics

access_log = logging.getLogger("mailui4agents.access")
# The id of the request being served, for every log line written while it is
# (logs.py puts it in each JSON line).
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


def new_request_id() -> str:
    """Generated here, never taken from the client: a client-chosen id would let
    anyone forge or collide with another request's lines."""
    return secrets.token_hex(8)


METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class Observe:
    def __init__(self, app: ASGIApp, *, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = new_request_id()
        token = request_id.set(rid)
        header = (b"x-request-id", rid.encode())
        status = 500  # an exception before the answer began: the server error page's
        streaming = False

        async def sending(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                for name, value in headers:
                    if name == b"content-type" and value.startswith(b"text/event-stream"):
                        streaming = True
                headers.append(header)
                message["headers"] = headers
            await send(message)

        crashed = True
        try:
            await self.app(scope, receive, sending)
            crashed = False
        finally:
            seconds = time.perf_counter() - started
            route = route_of(scope)
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.metrics.request(route, method, status, None if streaming else seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1f ms",
                    method,
                    route,
                    status,
                    seconds * 1000,
                    extra={
                        "request_id": rid,
                        "method": method,
                        "route": route,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 3),
                    },
                )
            if not crashed:
                # After a crash the id stays set: the server logs the traceback
                # next, in this request's own task (uvicorn runs one per request).
                request_id.reset(token)
