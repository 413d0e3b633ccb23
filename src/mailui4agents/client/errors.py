"""Errors raised by the client, built from the gateway's one error shape.

``{"error": {"code", "message", "field", "accepted_fields", ...}}`` — any further
keys (``reason``, ``permission_mode``, ``close_matches``) stay reachable via
:attr:`ApiError.detail`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mailui4agents.domain.failures import classify_failure
from mailui4agents.domain.json_types import JsonObject

if TYPE_CHECKING:  # only for the annotation: the hook's stdlib transport needs no httpx
    import httpx


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
    def detail(self) -> JsonObject:
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
        return cls.from_parts(
            response.status_code, response.reason_phrase, response.content, response.headers
        )

    @classmethod
    def from_parts(
        cls, status: int, reason_phrase: str, content: bytes, headers: Mapping[str, str]
    ) -> ApiError:
        """Parse a non-2xx answer from its parts: httpx's (``from_response``) and
        the hook's own transport (client/lite.py) decode errors the same way.
        ``headers`` must look names up case-insensitively (both transports do)."""
        text = content.decode("utf-8", "replace")
        try:
            body: Any = json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = text
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            error = {}
        code = str(error.get("code") or f"http_{status}")
        message = str(error.get("message") or "")
        if not message and error.get("reason"):
            message = f"{code}: {error['reason']}"  # the 409 bodies carry a reason only
        if not message and isinstance(body, str) and body.strip():
            message = body.strip()[:500]
        if not message:
            message = f"HTTP {status} {reason_phrase}".strip()
        accepted = error.get("accepted_fields")
        field = error.get("field")
        return cls(
            status,
            code,
            message,
            field=field if isinstance(field, str) else None,
            accepted_fields=[str(f) for f in accepted] if isinstance(accepted, list) else None,
            body=body,
            retry_after=_retry_after(headers.get("Retry-After")),
        )


def not_an_event_stream(status: int, url: object, content_type: str) -> ApiError | None:
    """The permanent error for a 200 that is not ``text/event-stream`` (None when
    it is): most likely AGENTMAIL_URL points at something that is not the
    gateway, and retrying would hammer it forever."""
    if content_type.lower().startswith("text/event-stream"):
        return None
    return ApiError(
        status,
        "not_event_stream",
        f"{url} answered {content_type or 'no content type'}, "
        "not text/event-stream: is AGENTMAIL_URL the gateway?",
        permanent=True,
    )


class GatewayUnreachable(ApiError):
    """A network error: the gateway did not answer. Always transient."""

    def __init__(self, url: str, cause: Exception, *, connected: bool = False) -> None:
        reason = str(cause) or type(cause).__name__
        what = "lost the connection to" if connected else "cannot reach"
        super().__init__(None, "unreachable", f"{what} the gateway at {url}: {reason}")
        self.url = url


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date; rare enough to fall back to our own backoff
    return max(0.0, seconds) if math.isfinite(seconds) else None
