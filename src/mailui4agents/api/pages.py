"""The list shape shared by every list endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel

from mailui4agents.wire.models import Page

M = TypeVar("M", bound=BaseModel)


def page(items: Sequence[M], next_cursor: str | None) -> Page[M]:
    return Page[M](items=list(items), next_cursor=next_cursor)
