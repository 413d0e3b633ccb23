"""The one place where a refusal becomes an HTTP answer.

Services raise domain errors (domain/errors.py) and know no statuses; the HTTP
layer raises `ApiError` with its own status. Both leave through `error_handler`,
in the one body shape `{"error": {"code", "message", "field"?, ...}}`.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from mailui4agents.domain.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
)
from mailui4agents.errors import ApiError

STATUS: dict[type[DomainError], int] = {
    Invalid: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    RateLimited: 429,
}


def status_of(exc: DomainError) -> int:
    """The status of the nearest class in STATUS (a bare DomainError is a 400)."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400


def as_api_error(exc: DomainError) -> ApiError:
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
    return ApiError(
        status_of(exc), exc.code, exc.message, field=exc.field, headers=headers, **exc.extra
    )


async def error_handler(request: Request, exc: Exception) -> JSONResponse:
    err = as_api_error(exc) if isinstance(exc, DomainError) else exc
    assert isinstance(err, ApiError)
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)
