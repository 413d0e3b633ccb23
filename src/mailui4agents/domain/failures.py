"""Permanent-versus-transient classification of failed gateway calls.

A client retries transient failures (server trouble, timeouts, rate limits,
network errors) with backoff and gives up at once on permanent ones. 401 is
permanent on purpose: a client once retried a revoked key for 18 hours.
"""

from __future__ import annotations

from typing import Literal

FailureKind = Literal["permanent", "transient"]

# 4xx statuses that mean "try again later" rather than "this request is wrong".
_RETRYABLE_CLIENT_ERRORS = frozenset({408, 429})


def is_permanent_status(status: int) -> bool:
    """Return True when retrying a request that got ``status`` cannot help.

    Every 4xx is permanent (bad request, unauthorized, forbidden, not found,
    conflict, too large, ...) except 408 Request Timeout and 429 Too Many
    Requests. 5xx and everything outside 4xx count as transient.
    """
    return 400 <= status <= 499 and status not in _RETRYABLE_CLIENT_ERRORS


def classify_failure(status: int | None) -> FailureKind:
    """Classify a failure by its HTTP status; ``None`` means a network error (transient)."""
    if status is not None and is_permanent_status(status):
        return "permanent"
    return "transient"
