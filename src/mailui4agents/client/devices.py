"""Device calls of the client (docs/api.md, "Devices"): pair a phone, list,
rename and revoke your devices. People only: an agent key gets 403."""

from __future__ import annotations

from urllib.parse import quote

from mailui4agents.client.client import AsyncClient
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.wire.devices import DeviceOut, PairingOut


class Devices:
    """`Devices(client).pair(...)` and friends."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def pair(self, name: str, user: str | None = None) -> PairingOut:
        """A one-time pairing URL (five minutes) for a device of `user` (admins)
        or of yourself."""
        body: JsonObject = {"name": name}
        if user is not None:
            body["user"] = user
        data = await self.client._call("POST", "/devices/pairings", json=body)
        return PairingOut.model_validate(data)

    async def list(self) -> list[DeviceOut]:
        return (await self.client._page("/devices", {}, DeviceOut)).items

    async def rename(self, device_id: str, name: str) -> DeviceOut:
        path = f"/devices/{quote(device_id, safe='')}"
        data = await self.client._call("PATCH", path, json={"name": name})
        return DeviceOut.model_validate(data)

    async def revoke(self, device_id: str) -> None:
        await self.client._call("DELETE", f"/devices/{quote(device_id, safe='')}")
