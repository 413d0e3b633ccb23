"""What a service refuses, in domain terms.

Services raise these; they know nothing of HTTP. The API maps each class to its
status (and `RateLimited` to a Retry-After header) in one table,
`mailui4agents.errors`. Every error carries the `code`, `message`, optional
`field` and extra members of the one error body (docs/api.md).
"""

from __future__ import annotations

from typing import Any, ClassVar


def error_body(code: str, message: str, field: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """The one error shape: `{"error": {"code", "message", "field"?, ...extra}}`."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    err.update(extra)
    return {"error": err}


class DomainError(Exception):
    """A refusal the caller should see: a code, a message, maybe a field."""

    default_code: ClassVar[str] = "invalid_value"

    def __init__(
        self, message: str, *, code: str | None = None, field: str | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message
        self.field = field
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.field, self.extra)


class Invalid(DomainError):
    """The input is wrong: `field` names what to fix."""

    def __init__(
        self, field: str, message: str, *, code: str = "invalid_value", **extra: Any
    ) -> None:
        super().__init__(message, code=code, field=field, **extra)


class Missing(Invalid):
    """A field the request needs is absent."""

    def __init__(self, field: str, message: str, **extra: Any) -> None:
        super().__init__(field, message, code="missing_field", **extra)


class NotFound(DomainError):
    """It does not exist — or, for this caller, it is as if it did not."""

    default_code = "not_found"

    def __init__(self, what: str, *, message: str | None = None, **extra: Any) -> None:
        super().__init__(message or f"{what} not found", **extra)


class Forbidden(DomainError):
    """The caller may see it but lacks the power to do this."""

    default_code = "forbidden"


class Conflict(DomainError):
    """The state of things refuses it; `reason` (when given) says which rule."""

    default_code = "conflict"

    def __init__(
        self, message: str, *, reason: str | None = None, code: str | None = None, **extra: Any
    ) -> None:
        if reason is not None:
            extra = {"reason": reason, **extra}
        super().__init__(message, code=code, **extra)


class RateLimited(DomainError):
    """Too many, too fast: try again in `retry_after` seconds."""

    default_code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, retry_after=retry_after)
        self.retry_after = retry_after


class TooLarge(DomainError):
    """Over a size limit of `limit` bytes."""

    default_code = "too_large"

    def __init__(self, message: str, *, limit: int, field: str | None = None) -> None:
        super().__init__(message, field=field, limit=limit)
        self.limit = limit


def not_found(what: str, **extra: Any) -> NotFound:
    return NotFound(what, **extra)


def forbidden(message: str) -> Forbidden:
    return Forbidden(message)


def conflict(message: str, **extra: Any) -> Conflict:
    return Conflict(message, **extra)


def invalid_value(field: str, message: str, **extra: Any) -> Invalid:
    return Invalid(field, message, **extra)
