"""``agentmail forward | search | contacts``: finding and passing on mail.

Agents read in the scope of the session they work in: ``--session`` (default
``$AGENTMAIL_SESSION_ID``, which the bridge sets for mail-driven turns).
"""

from __future__ import annotations

from typing import Any

import click

from mailui4agents.cli.common import echo_json, run, scope_for, session_option
from mailui4agents.cli.output import mail_line, one_line
from mailui4agents.client import AsyncClient, MailOut, Page
from mailui4agents.wire.models import ContactOut


def _dump(mail: MailOut) -> dict[str, Any]:
    return mail.model_dump(mode="json", by_alias=True)


@click.command("forward")
@click.argument("mail_id", metavar="ID")
@click.option("--to", "to", multiple=True, required=True, metavar="ADDR", help="Repeatable.")
@click.option("--cc", multiple=True, metavar="ADDR", help="Repeatable.")
@click.option("--note", help="A note above the forwarded mail.")
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print the new mail as JSON.")
def forward(
    mail_id: str,
    to: tuple[str, ...],
    cc: tuple[str, ...],
    note: str | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Forward mail ID (quoted, with its attachments) to new recipients."""

    async def act(client: AsyncClient) -> MailOut:
        scope = scope_for(client, session_id)
        return await client.forward_mail(
            mail_id, list(to), cc=list(cc) or None, note=note, session_id=scope
        )

    mail = run(act)
    if as_json:
        echo_json(_dump(mail))
        return
    click.echo(f"Forwarded as {mail.id} in session {mail.session_alias or mail.session_id}.")
    if mail.reply_address:
        click.echo(f"Reply address: {mail.reply_address}")


@click.command("search")
@click.argument("query", nargs=-1, required=True)
@session_option
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: tuple[str, ...], session_id: str | None, limit: int, as_json: bool) -> None:
    """Find mail whose subject or body has every word of QUERY (word* = prefix)."""
    text = " ".join(query)

    async def act(client: AsyncClient) -> Page[MailOut]:
        return await client.search_mail(text, session_id=scope_for(client, session_id), limit=limit)

    page = run(act)
    if as_json:
        echo_json({"items": [_dump(m) for m in page.items], "next_cursor": page.next_cursor})
        return
    if not page.items:
        click.echo("No mail found.")
    for mail in page.items:
        click.echo(mail_line(mail))
        snippet = (mail.model_extra or {}).get("snippet")
        if snippet:
            click.echo(f"    {one_line(str(snippet))}")
    if page.next_cursor:
        click.echo(f"(more: showing the newest {len(page.items)})")


@click.command("contacts")
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def contacts(session_id: str | None, as_json: bool) -> None:
    """People and agents you exchanged mail with, most recent first."""

    async def act(client: AsyncClient) -> list[ContactOut]:
        return await client.contacts(session_id=scope_for(client, session_id))

    people = run(act)
    if as_json:
        echo_json(people)
        return
    if not people:
        click.echo("No contacts yet.")
    for c in people:
        unread = f"{c.unread} unread" if c.unread else ""
        line = f"{c.name:<20} {c.kind:<6} {c.last_address or ''}  {unread}"
        click.echo(line.rstrip())
