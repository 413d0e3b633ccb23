"""Device routes (docs/api.md, "Devices"): pair a phone by QR, list your devices,
rename or revoke one. People only (agent keys: 403); a device of someone else is
404, admins included, as for tokens. services/devices.py holds the rules."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.validation import StrictBody
from mailui4agents.services import devices
from mailui4agents.wire.devices import DeviceOut, PairingOut
from mailui4agents.wire.models import Page, Revoked

router = APIRouter(prefix="/api/v1/devices", tags=["devices"])


class PairingIn(StrictBody):
    """`name`: what the device is called ("Ana's phone"); `user`: whose device it
    becomes (admins only, for another person; default: the caller)."""

    name: str = Field(min_length=1, max_length=devices.MAX_NAME)
    user: str | None = None


class DevicePatch(StrictBody):
    name: str = Field(min_length=1, max_length=devices.MAX_NAME)


def pairing_url(request: Request, code: str) -> str:
    """The page that logs a browser in with `code`, on the address the caller
    reached the gateway by (behind a proxy: its Host and, from a trusted proxy,
    its scheme; `agentmail serve --forwarded-allow-ips`)."""
    return f"{str(request.base_url).rstrip('/')}/pair/{code}"


@router.post("/pairings", status_code=201, response_model=PairingOut)
async def create_pairing(
    body: PairingIn, request: Request, who: Human, gw: GatewayDep
) -> PairingOut:
    """A one-time pairing URL for a device (single use, five minutes); the code
    in it is shown only here. Another person's device: admins only (403)."""
    async with gw.write() as s:
        code, expires, user = await devices.create_pairing(s, who, body.name, body.user)
    return PairingOut(
        url=pairing_url(request, code),
        code_expires_at=expires,
        name=devices.clean_name(body.name),
        user=user.username,
    )


@router.get("", response_model=Page[DeviceOut])
async def list_devices(who: Human, gw: GatewayDep) -> Page[DeviceOut]:
    """The caller's devices whose web session still works, newest first."""
    async with gw.read() as s:
        items = await devices.list_devices(s, who)
    return page(items, None)


@router.patch("/{device_id}", response_model=DeviceOut)
async def rename_device(device_id: str, body: DevicePatch, who: Human, gw: GatewayDep) -> DeviceOut:
    async with gw.write() as s:
        return await devices.rename_device(s, who, device_id, body.name)


@router.delete("/{device_id}", response_model=Revoked)
async def revoke_device(device_id: str, who: Human, gw: GatewayDep) -> Revoked:
    """Revoke the device: its web session ends at once (its cookie is refused at
    its next request, its open streams end)."""
    async with gw.write() as s:
        await devices.revoke_device(s, who, device_id)
    return Revoked(revoked=device_id)
