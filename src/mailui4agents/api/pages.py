"""The list shape shared by every list endpoint."""

from __future__ import annotations

from typing import Any


def page(items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "next_cursor": next_cursor}
