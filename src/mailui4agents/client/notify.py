"""Notification policy calls of the client (docs/remote.md, "Notification
policy"): read and change your own policy. People only: an agent key gets 403."""

from __future__ import annotations

from typing import Any

from mailui4agents.client.client import AsyncClient
from mailui4agents.wire.notify import NotifyPolicyOut

PATH = "/me/notify-policy"


class NotifyPolicy:
    """`NotifyPolicy(client).get()` / `.set(push=False, quiet_start=None, ...)`."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def get(self) -> NotifyPolicyOut:
        return NotifyPolicyOut.model_validate(await self.client._call("GET", PATH))

    async def set(self, **changes: Any) -> NotifyPolicyOut:
        """Change only the fields given (None: off, for quiet hours, a reminder
        or escalation); the whole policy comes back."""
        data = await self.client._call("PUT", PATH, json=changes)
        return NotifyPolicyOut.model_validate(data)
