"""E-mail address routes (docs/api.md, "E-mail addresses"): your addresses, each
verified by a link mailed to it, and the e-mail sender's counters. People only
(agent keys: 403); an address of someone else is 404, admins included. The
rules are in services/email_addresses.py; sending in services/email_send.py."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import Field

from mailui4agents.api.deps import Admin, GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.validation import StrictBody
from mailui4agents.domain.email_address import MAX_ADDRESS
from mailui4agents.services import email_addresses, email_send
from mailui4agents.wire.email import EmailAddressOut, EmailRemoved, EmailStatsOut
from mailui4agents.wire.models import Page

router = APIRouter(prefix="/api/v1/me/emails", tags=["email"])
stats_router = APIRouter(prefix="/api/v1/email", tags=["email"])


class EmailIn(StrictBody):
    address: str = Field(min_length=1, max_length=MAX_ADDRESS + 10)  # spaces are trimmed


def verify_url(request: Request, token: str) -> str:
    """The verification page on the address the caller reached the gateway by
    (as for pairing links: api/devices.py)."""
    return email_addresses.verify_url(str(request.base_url), token)


@router.get("", response_model=Page[EmailAddressOut])
async def list_emails(who: Human, gw: GatewayDep) -> Page[EmailAddressOut]:
    """Your addresses, oldest first, with what became of the last e-mail to each."""
    async with gw.read() as s:
        items = await email_addresses.list_addresses(s, who)
    return page(items, None)


@router.post("", status_code=201, response_model=EmailAddressOut)
async def add_email(
    body: EmailIn, request: Request, response: Response, who: Human, gw: GatewayDep
) -> EmailAddressOut:
    """Add an address and mail it a verification link (201); an address you
    have unverified gets a new link (200; the old link stops working)."""
    async with gw.write() as s:
        out, created = await email_addresses.add_address(
            s, gw.settings, who, body.address, lambda token: verify_url(request, token)
        )
    if not created:
        response.status_code = 200
    return out


@router.delete("/{address_id}", response_model=EmailRemoved)
async def remove_email(address_id: str, who: Human, gw: GatewayDep) -> EmailRemoved:
    """Remove one of your addresses; e-mail queued to it is not sent."""
    async with gw.write() as s:
        await email_addresses.remove_address(s, who, address_id)
    return EmailRemoved(removed=address_id)


@stats_router.get("/stats", response_model=EmailStatsOut)
async def stats(who: Admin, gw: GatewayDep) -> EmailStatsOut:
    """This process's e-mail outcomes since it started, and the outbox (admins)."""
    async with gw.read() as s:
        queue = await email_send.queue_counts(s)
    sender = gw.email
    return EmailStatsOut(
        configured=sender is not None,
        relay=sender.relay.shown() if sender is not None else None,
        counts=dict(sender.counts) if sender is not None else {},
        queue=queue,
        inbound=dict(gw.email_in_counts),
    )
