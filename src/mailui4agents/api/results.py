"""Domain results as HTTP answers: created is 201 (the route's default), a
relay-key duplicate is 200 with `{"status": "duplicate_relay", <id field>}`."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from mailui4agents.domain.results import Duplicate, Opened, Sent
from mailui4agents.wire import models as wire

# The 200 of a write whose relay key was used before (the 201 is the route's own).
DUPLICATE: dict[int | str, dict[str, Any]] = {
    200: {
        "model": wire.Duplicate,
        "description": "This relay key was used before: nothing was written",
    }
}


def answer(result: Sent | Opened | Duplicate, response: Response) -> dict[str, Any]:
    if isinstance(result, Duplicate):
        response.status_code = 200
        return result.body()
    return result.mail if isinstance(result, Sent) else result.request
