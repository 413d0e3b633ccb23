"""Strict request bodies, and turning validation failures into our error shape.

Every body model forbids unknown fields and is strict about types: a misspelt
field must not be silently dropped, and "1" is not an integer.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from mailui4agents.domain.json_types import JsonObject
from mailui4agents.errors import ApiError

# JSON has no UUID type: accept the string form (and only well-formed ones).
Id = Annotated[uuid.UUID, Field(strict=False)]

# Body characters a listing or a read keeps (0: the whole body). The services
# fetch body_limit + 1 characters, bound as a 32-bit integer on PostgreSQL: past
# this it overflowed (500s from 2^31 on PostgreSQL, 2^63 - 1 on SQLite).
BODY_LIMIT_MAX = 2**31 - 2
BodyLimit = Annotated[int | None, Query(ge=0, le=BODY_LIMIT_MAX)]


class StrictBody(BaseModel):
    """Base class of every request body."""

    model_config = ConfigDict(extra="forbid", strict=True)


_EXPECTED = {
    "string_type": "string",
    "int_type": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "uuid_type": "UUID string",
    "none_required": "null",
    # Query and path parameters are text, so their type errors come as "parsing".
    "int_parsing": "integer",
    "float_parsing": "number",
    "bool_parsing": "boolean",
}


def _body_model(request: Request) -> type[BaseModel] | None:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    for param in getattr(dependant, "body_params", []) or []:
        annotation = getattr(param.field_info, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
    return None


def accepted_fields(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _field_name(loc: tuple[Any, ...]) -> str:
    # loc looks like ("body", "to", 0) or ("query", "limit"). List items are named
    # "to[0]", as the services name them, so one field has one name in every error.
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path") else []
    if not parts:
        return str(loc[0]) if loc else "body"
    name = str(parts[0])
    for p in parts[1:]:
        name += f"[{p}]" if isinstance(p, int) else f".{p}"
    return name


def error_from_validation(
    request: Request, exc: RequestValidationError, model: type[BaseModel] | None = None
) -> ApiError:
    """Pick the most useful error: unknown fields first, then types, then values."""
    errors = list(exc.errors())
    model = model or _body_model(request)
    accepted = accepted_fields(model)

    def rank(e: JsonObject) -> int:
        order = {"extra_forbidden": 0, "json_invalid": 0, "missing": 2}
        return order.get(e.get("type", ""), 3 if e.get("type") not in _EXPECTED else 1)

    errors.sort(key=rank)
    e = errors[0]
    kind, loc = e.get("type", ""), tuple(e.get("loc", ()))
    field = _field_name(loc)
    in_body = bool(loc) and loc[0] == "body"
    extra: JsonObject = {"accepted_fields": accepted} if in_body else {}

    # The body as a whole (not a field of it) is broken, not an object, or absent.
    # An absent body is not `missing_field "body"`: /mail has a field of that name.
    whole_body = in_body and len(loc) == 1 and (kind in _EXPECTED or kind == "missing")
    if kind == "json_invalid" or whole_body:
        return ApiError(
            400, "invalid_type", "the request body must be a JSON object", field="body", **extra
        )
    if kind == "extra_forbidden":
        return ApiError(
            400, "unknown_field", f'field "{field}" is not accepted here', field=field, **extra
        )
    if kind == "missing":
        return ApiError(400, "missing_field", f'field "{field}" is required', field=field, **extra)
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        return ApiError(
            400,
            "invalid_type",
            f'field "{field}" must be of type {expected}',
            field=field,
            expected=expected,
            **extra,
        )
    return ApiError(
        400,
        "invalid_value",
        f'field "{field}": {e.get("msg", "invalid value")}',
        field=field,
        **extra,
    )


async def validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    err = error_from_validation(request, exc)
    return JSONResponse(err.body(), status_code=err.status)
