"""Typed Python client for the MailUI4Agents gateway (REST + SSE).

The CLI, the MCP server and the bridge all talk to the gateway through this
package, exactly as a remote user would.
"""

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
