"""The list shape shared by every list endpoint."""

from __future__ import annotations

from typing import Any

from mailui4agents.errors import invalid_value


def page(items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "next_cursor": next_cursor}


def no_attachments_yet(ids: list[Any]) -> None:
    """Refuse rather than drop: a mail quietly missing its attachments is worse."""
    if ids:
        raise invalid_value("attachment_ids", "attachments are not supported by this gateway yet")
