"""Starlette's own errors (unknown route, wrong method, a crash) in our error shape.

Without these, a 404 for an unknown path or a 405 answered `{"detail": ...}`,
and a 405's `Allow` named only the first route of the path (GET /sessions/{id}
hid PATCH /sessions/{id}).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match

from mailui4agents.errors import ApiError

_CODES = {
    400: "invalid_value",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    429: "rate_limited",
}


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route fully matches on this path. Asked of the routes
    themselves (FastAPI nests included routers), one method at a time."""
    scope = {k: v for k, v in request.scope.items() if k not in ("route", "endpoint")}
    return [
        m
        for m in _METHODS
        if any(r.matches({**scope, "method": m})[0] is Match.FULL for r in request.app.routes)
    ]


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        err = ApiError(404, "not_found", f"no route {request.url.path}")
    elif exc.status_code == 405 and request.method == "OPTIONS":
        # OPTIONS asks what the path allows: its own methods, nothing more (no CORS).
        allow = [*allowed_methods(request), "OPTIONS"]
        return Response(status_code=204, headers={"Allow": ", ".join(allow)})
    elif exc.status_code == 405:
        allow = allowed_methods(request)
        headers["Allow"] = ", ".join(allow)
        err = ApiError(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.url.path}",
            allowed_methods=allow,
        )
    else:
        code = _CODES.get(exc.status_code, "http_error")
        err = ApiError(exc.status_code, code, str(exc.detail))
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A crash still answers in the error shape (Starlette logs the traceback)."""
    return JSONResponse(
        {"error": {"code": "internal", "message": "internal error; the gateway logged it"}},
        status_code=500,
    )
