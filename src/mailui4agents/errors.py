"""Errors raised by the HTTP layer itself (authentication, body limits, unknown
routes): a status, the one `{"error": {...}}` body, and headers. Services raise
domain errors instead (domain/errors.py); `as_api_error` here gives each its
status, for the API (api/errors.py) and the web pages (web/data.py) alike."""

from __future__ import annotations

from typing import Any

from mailui4agents.domain.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
    error_body,
)


class ApiError(Exception):
    """An error the client should see: HTTP status + `{"error": {...}}` body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.field, self.extra)


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
    """A domain error as the status, body and headers the client sees."""
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
    return ApiError(
        status_of(exc), exc.code, exc.message, field=exc.field, headers=headers, **exc.extra
    )
