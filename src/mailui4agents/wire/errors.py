"""The one error shape: `{"error": {"code", "message", "field"?, ...}}`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ErrorDetail(BaseModel):
    """`code` says what went wrong (a machine word), `message` says it to a
    person, `field` names the input to fix. Some codes carry more members
    (`limit`, `retry_after`, `reason`, `close_matches`, `accepted_fields`...)."""

    model_config = ConfigDict(extra="allow")
    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    error: ErrorDetail
