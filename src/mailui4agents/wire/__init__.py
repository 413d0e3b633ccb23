"""The wire contract shared by the gateway and the client: it depends only on
pydantic and the standard library, so either side can import it."""

from __future__ import annotations

from mailui4agents.wire.events import EventType

__all__ = ["EventType"]
