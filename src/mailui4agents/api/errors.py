"""Where a refusal becomes the API's HTTP answer.

Services raise domain errors (domain/errors.py) and know no statuses; the HTTP
layer raises `ApiError` with its own status. Both leave through `error_handler`,
in the one body shape `{"error": {"code", "message", "field"?, ...}}`. The status
of each domain error is in one table, mailui4agents/errors.py (the web pages use
it too).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from mailui4agents.domain.errors import DomainError
from mailui4agents.errors import STATUS, ApiError, as_api_error, status_of

__all__ = ["STATUS", "as_api_error", "error_handler", "status_of"]


async def error_handler(request: Request, exc: Exception) -> JSONResponse:
    err = as_api_error(exc) if isinstance(exc, DomainError) else exc
    assert isinstance(err, ApiError)
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)
