"""Domain results as HTTP answers: created is 201 (the route's default), a
relay-key duplicate is 200 with `{"status": "duplicate_relay", <id field>}`."""

from __future__ import annotations

from fastapi import Response

from mailui4agents.api.pages import json_model, json_object
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.results import Duplicate, Opened, Sent
from mailui4agents.wire import models as wire

# The 200 of a write whose relay key was used before (the 201 is the route's own).
DUPLICATE: dict[int | str, JsonObject] = {
    200: {
        "model": wire.Duplicate,
        "description": "This relay key was used before: nothing was written",
    }
}


def _duplicate(result: Duplicate, response: Response) -> wire.Duplicate:
    response.status_code = 200
    return result.body()


def answer(result: Sent | Duplicate, response: Response) -> Response | wire.Duplicate:
    """A send: the mail (201) as the JSON its route's `response_model` would send
    (tests/api/test_listing_bytes.py), without validating and encoding it through
    the model again; or the first mail's id (200)."""
    if isinstance(result, Duplicate):
        return _duplicate(result, response)
    return json_object(result.item, status_code=201)


def answer_request(result: Opened | Duplicate, response: Response) -> Response | wire.Duplicate:
    """A permission request: the request (201), or the first request's id (200)."""
    if isinstance(result, Duplicate):
        return _duplicate(result, response)
    return json_model(result.request, status_code=201)
