"""The one error shape of the API, raised from services and routes alike."""

from __future__ import annotations

from typing import Any


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
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            err["field"] = self.field
        err.update(self.extra)
        return {"error": err}


def not_found(what: str, **extra: Any) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found", **extra)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "forbidden", message)


def conflict(message: str, **extra: Any) -> ApiError:
    return ApiError(409, "conflict", message, **extra)


def invalid_value(field: str, message: str, **extra: Any) -> ApiError:
    return ApiError(400, "invalid_value", message, field=field, **extra)
