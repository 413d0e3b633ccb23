"""The list shape shared by every list endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pydantic_core
from fastapi import Response
from pydantic import BaseModel

from mailui4agents.wire.models import JsonObject, Page

M = TypeVar("M", bound=BaseModel)

# Held here: pydantic keeps a parametrised generic only while it is referenced,
# and rebuilt `Page[M]` (its whole schema: defer_build) on every page otherwise.
_PAGE: type[Page[Any]] = Page[M]  # type: ignore[valid-type]


def page(items: Sequence[M], next_cursor: str | None) -> Page[M]:
    return _PAGE(items=list(items), next_cursor=next_cursor)


def json_page(items: list[JsonObject], next_cursor: str | None) -> Response:
    """A page whose items are JSON objects already (services/wire_shapes.page_items):
    the bytes the route's `response_model` would send, without building and
    validating the models twice (FastAPI sends a returned Response as it is)."""
    return json_object({"items": items, "next_cursor": next_cursor})


def json_object(item: JsonObject, status_code: int = 200) -> Response:
    """One JSON object built as the route's `response_model` would send it
    (services/wire_shapes.page_items), sent as it is."""
    return Response(
        content=pydantic_core.to_json(item), status_code=status_code, media_type="application/json"
    )


def json_model(model: BaseModel, status_code: int = 200) -> Response:
    """A model as a route's `response_model` with `response_model_exclude_unset`
    sends it (by alias, unset fields left out), without FastAPI validating and
    encoding it through that model once more (tests/api/test_listing_bytes.py)."""
    return Response(
        content=model.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status_code,
        media_type="application/json",
    )
