"""``agentmail pair`` and ``agentmail devices``: log a phone in by QR code, and
list or revoke the devices logged in so (docs/web.md, "Pairing a phone")."""

from __future__ import annotations

import io

import click

from mailui4agents.cli.common import echo_json, people_only, run
from mailui4agents.client import AsyncClient
from mailui4agents.client.devices import Devices
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.devices import DeviceOut, PairingOut

DEFAULT_NAME = "phone"


def terminal_qr(url: str) -> str:
    """The QR code of `url` in Unicode half blocks (segno), two rows of modules
    per line so that it fits a terminal; light modules are drawn, as on a dark
    terminal (phone cameras read either way round)."""
    import segno  # only this command pays for the import

    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True)
    return out.getvalue()


@click.command("pair")
@click.option("--user", help="Pair a device for this person (admins only).")
@click.option(
    "--name",
    default=DEFAULT_NAME,
    show_default=True,
    help='What the device is called ("Ana\'s phone").',
)
@click.option("--json", "as_json", is_flag=True, help="Print {url, code_expires_at} as JSON.")
def pair(user: str | None, name: str, as_json: bool) -> None:
    """Print a QR code that logs a phone in (once, within five minutes).

    Scan it with the phone's camera; the page it opens has one button, "Log in on
    this device". The URL is printed on the last line, alone."""
    people_only("pair")

    async def act(client: AsyncClient) -> PairingOut:
        return await Devices(client).pair(name, user)

    made = run(act)
    if as_json:
        echo_json(made)
        return
    click.echo(terminal_qr(made.url), nl=False)
    until = rfc3339(made.code_expires_at.replace(microsecond=0))
    click.echo(
        f"Scan it on the device within five minutes (until {until}); "
        f"it works once and logs in as {made.user}, device “{made.name}”."
    )
    click.echo(made.url)


@click.command("devices")
@click.option("--revoke", "revoke_ids", multiple=True, metavar="ID", help="Revoke this device.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def devices(revoke_ids: tuple[str, ...], as_json: bool) -> None:
    """List your paired devices (or revoke some with --revoke ID: logged out at once)."""

    async def act(client: AsyncClient) -> list[DeviceOut]:
        for device_id in revoke_ids:
            await Devices(client).revoke(device_id)
        return [] if revoke_ids else await Devices(client).list()

    items = run(act)
    for device_id in revoke_ids:
        click.echo(f"Revoked device {device_id}.")
    if revoke_ids:
        return
    if as_json:
        echo_json(items)
        return
    if not items:
        click.echo("No paired devices.")
    for d in items:
        seen = rfc3339(d.last_seen_at) if d.last_seen_at else "never"
        click.echo(f"{d.id}  {d.name}  paired {rfc3339(d.created_at)}  last seen {seen}")
