"""Typed Python client for the MailUI4Agents gateway (REST + SSE).

The CLI, the MCP server and the bridge all talk to the gateway through this
package, exactly as a remote user would.

Names are imported on first use (PEP 562): a hook process that decides a call
without the gateway must not pay for importing httpx and pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailui4agents.client.client import AsyncClient
    from mailui4agents.client.config import ClientConfig
    from mailui4agents.client.errors import ApiError, GatewayUnreachable
    from mailui4agents.client.models import (
        AttachmentRef,
        Event,
        InboxItem,
        MailOut,
        NewMailEvent,
        Page,
        SessionOut,
    )
    from mailui4agents.client.sse import SSEEvent, SSEParser

_WHERE = {
    "AsyncClient": "client",
    "ClientConfig": "config",
    "ApiError": "errors",
    "GatewayUnreachable": "errors",
    "AttachmentRef": "models",
    "Event": "models",
    "InboxItem": "models",
    "MailOut": "models",
    "NewMailEvent": "models",
    "Page": "models",
    "SessionOut": "models",
    "SSEEvent": "sse",
    "SSEParser": "sse",
}

__all__ = [
    "ApiError",
    "AsyncClient",
    "AttachmentRef",
    "ClientConfig",
    "Event",
    "GatewayUnreachable",
    "InboxItem",
    "MailOut",
    "NewMailEvent",
    "Page",
    "SSEEvent",
    "SSEParser",
    "SessionOut",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
