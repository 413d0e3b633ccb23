"""E-mail address calls of the client (docs/api.md, "E-mail addresses"): add,
list and remove your own addresses. People only: an agent key gets 403."""

from __future__ import annotations

from urllib.parse import quote

from mailui4agents.client.client import AsyncClient
from mailui4agents.wire.email import EmailAddressOut


class Emails:
    """`Emails(client).add("ana@example.org")` and friends."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def add(self, address: str) -> EmailAddressOut:
        """Add an address (or renew its link); the gateway mails it a verification link."""
        data = await self.client._call("POST", "/me/emails", json={"address": address})
        return EmailAddressOut.model_validate(data)

    async def list(self) -> list[EmailAddressOut]:
        return (await self.client._page("/me/emails", {}, EmailAddressOut)).items

    async def remove(self, address_id: str) -> None:
        await self.client._call("DELETE", f"/me/emails/{quote(address_id, safe='')}")
