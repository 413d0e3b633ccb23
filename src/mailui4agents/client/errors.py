"""Errors raised by the client, built from the gateway's one error shape.

``{"error": {"code", "message", "field", "accepted_fields", ...}}`` — any further
keys (``reason``, ``permission_mode``, ``close_matches``) stay reachable via
:attr:`ApiError.detail`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from mailui4agents.domain.failures import classify_failure


class ApiError(Exception):
    """The gateway refused a request, or could not be reached (``status`` None)."""

    def __init__(
        self,
        status: int | None,
        code: str,
        message: str,
        *,
        field: str | None = None,
        accepted_fields: list[str] | None = None,
        body: Any = None,
        retry_after: float | None = None,
        permanent: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.accepted_fields = accepted_fields
        self.body = body
        self.retry_after = retry_after
        self._permanent = permanent

    @property
    def permanent(self) -> bool:
        """True when retrying cannot help (e.g. 401 revoked key, 403, 404, 400).

        Derived from the status unless the error was raised with an explicit verdict.
        """
        if self._permanent is not None:
            return self._permanent
        return classify_failure(self.status) == "permanent"

    @property
    def detail(self) -> dict[str, Any]:
        """The ``error`` object of the body, or ``{}`` when the body had none."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return dict(self.body["error"])
        return {}

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(status={self.status!r}, code={self.code!r}, message={self.message!r})"

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """Parse a non-2xx response (its body must already be read)."""
        try:
            body: Any = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = response.text
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            error = {}
        code = str(error.get("code") or f"http_{response.status_code}")
        message = str(error.get("message") or "")
        if not message and error.get("reason"):
            message = f"{code}: {error['reason']}"  # the 409 bodies carry a reason only
        if not message and isinstance(body, str) and body.strip():
            message = body.strip()[:500]
        if not message:
            message = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        accepted = error.get("accepted_fields")
        field = error.get("field")
        return cls(
            response.status_code,
            code,
            message,
            field=field if isinstance(field, str) else None,
            accepted_fields=[str(f) for f in accepted] if isinstance(accepted, list) else None,
            body=body,
            retry_after=_retry_after(response),
        )


class GatewayUnreachable(ApiError):
    """A network error: the gateway did not answer. Always transient."""

    def __init__(self, url: str, cause: Exception, *, connected: bool = False) -> None:
        reason = str(cause) or type(cause).__name__
        what = "lost the connection to" if connected else "cannot reach"
        super().__init__(None, "unreachable", f"{what} the gateway at {url}: {reason}")
        self.url = url


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date; rare enough to fall back to our own backoff
    return max(0.0, seconds) if math.isfinite(seconds) else None
