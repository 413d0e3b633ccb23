"""Errors raised by the HTTP layer itself (authentication, body limits, unknown
routes): a status, the one `{"error": {...}}` body, and headers. Services raise
domain errors instead (domain/errors.py); api/errors.py maps those to statuses."""

from __future__ import annotations

from typing import Any

from mailui4agents.domain.errors import error_body


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
