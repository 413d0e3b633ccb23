"""``agentmail user email add|list|remove``: your own e-mail addresses
(docs/email.md, "Addresses"). An address gets the gateway's e-mail only once
you opened the link mailed to it and pressed its button."""

from __future__ import annotations

import click

from mailui4agents.cli.common import echo_json, fail, people_only, run
from mailui4agents.client import AsyncClient
from mailui4agents.client.email import Emails
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.email import EmailAddressOut


def _when(value: object) -> str:
    from datetime import datetime

    return rfc3339(value.replace(microsecond=0)) if isinstance(value, datetime) else "-"


def describe(item: EmailAddressOut) -> str:
    """One line: the address, whether it counts, and what became of its last mail."""
    if item.verified:
        status = f"verified {_when(item.verified_at)}"
    else:
        status = f"unverified (link until {_when(item.verify_expires_at)})"
    line = f"{item.address}  {status}"
    mail = item.last_mail
    if mail is not None:
        said = f": {mail.detail}" if mail.detail and mail.state != "queued" else ""
        line += f"; last e-mail ({mail.kind}) {mail.state}{said}"
    return line


@click.group("email")
def email() -> None:
    """Your e-mail addresses: add one (a verification link is mailed to it), list, remove."""


@email.command("add")
@click.argument("address")
@click.option("--json", "as_json", is_flag=True, help="Print the address as JSON.")
def email_add(address: str, as_json: bool) -> None:
    """Add ADDRESS and mail it a verification link (again: a new link)."""
    people_only("e-mail addresses")

    async def act(client: AsyncClient) -> EmailAddressOut:
        return await Emails(client).add(address)

    item = run(act)
    if as_json:
        echo_json(item)
        return
    click.echo(
        f"A verification link is on its way to {item.address}: open it and press the "
        f"button before {_when(item.verify_expires_at)}. "
        "`agentmail user email list` shows whether the mail went out."
    )


@email.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def email_list(as_json: bool) -> None:
    """List your addresses and what became of the last e-mail to each."""
    people_only("e-mail addresses")

    async def act(client: AsyncClient) -> list[EmailAddressOut]:
        return await Emails(client).list()

    items = run(act)
    if as_json:
        echo_json(items)
        return
    if not items:
        click.echo("No e-mail addresses. Add one: agentmail user email add ADDRESS")
    for item in items:
        click.echo(describe(item))


@email.command("remove")
@click.argument("address")
def email_remove(address: str) -> None:
    """Remove ADDRESS (e-mail queued to it is not sent)."""
    people_only("e-mail addresses")
    wanted = address.strip().lower()

    async def act(client: AsyncClient) -> str | None:
        emails = Emails(client)
        for item in await emails.list():
            if item.address == wanted or item.id == address:
                await emails.remove(item.id)
                return item.address
        return None

    removed = run(act)
    if removed is None:
        fail(f"{address} is not one of your addresses (agentmail user email list)")
    click.echo(f"Removed {removed}.")
