"""``agentmail send | inbox | read | thread``: mail from the command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

import click

from mailui4agents.cli.common import echo_json, run, scope_for, session_option
from mailui4agents.cli.output import mail_line, mail_text
from mailui4agents.client import AsyncClient, InboxItem, MailOut, Page
from mailui4agents.wire.models import Duplicate

NO_BODY = "no body: give --body, --body-file, or pipe the body on stdin"


def resolve_body(body: str | None, body_file: str | None, stdin: TextIO) -> str:
    """Pick the mail body: ``--body``, else ``--body-file`` (``-`` = stdin), else piped stdin.

    Reading an interactive terminal would hang silently, so that is a usage error.
    """
    if body is not None and body_file is not None:
        raise click.UsageError("give --body or --body-file, not both")
    if body is not None:
        return body
    if body_file == "-" or (body_file is None and not stdin.isatty()):
        return stdin.read()
    if body_file is not None:
        return Path(body_file).read_text(encoding="utf-8")
    raise click.UsageError(NO_BODY)


def _dump(mail: MailOut) -> dict[str, Any]:
    return mail.model_dump(mode="json", by_alias=True)


@click.command("send")
@click.option("--to", "to", multiple=True, required=True, metavar="ADDR", help="Repeatable.")
@click.option("--cc", multiple=True, metavar="ADDR", help="Repeatable.")
@click.option("--subject", required=True)
@click.option("--body", help="The body text.")
@click.option(
    "--body-file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Read the body from this file ('-' for stdin).",
)
@click.option("--parent", metavar="ID", help="Reply to this mail (same session).")
@click.option(
    "--mode",
    type=click.Choice(["plan", "workspace", "full"]),
    help="Permission mode of a session this mail starts (people only).",
)
@click.option(
    "--worktree",
    is_flag=True,
    help="A session this mail starts runs in its own git worktree (people only; docs/review.md).",
)
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="Attach this file (repeatable); uploaded first, then sent with the mail.",
)
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print the sent mail as JSON.")
def send(
    to: tuple[str, ...],
    cc: tuple[str, ...],
    subject: str,
    body: str | None,
    body_file: str | None,
    parent: str | None,
    mode: str | None,
    worktree: bool,
    attach: tuple[str, ...],
    session_id: str | None,
    as_json: bool,
) -> None:
    """Send a mail. The body comes from --body, --body-file or stdin. An agent's
    mail names the session it works in (--session, $AGENTMAIL_SESSION_ID): it
    sets other agents to work only from there (docs/access.md)."""
    text = resolve_body(body, body_file, sys.stdin)

    async def deliver(client: AsyncClient) -> MailOut | Duplicate:
        ids = [(await client.upload_attachment(path)).attachment_id for path in attach]
        return await client.send_mail(
            list(to),
            subject,
            text,
            cc=list(cc) or None,
            parent_mail_id=parent,
            permission_mode=mode,
            worktree=True if worktree else None,
            attachment_ids=ids or None,
            from_session_id=session_id if client.config.is_agent else None,
        )

    sent = run(deliver)
    if not isinstance(sent, MailOut):  # only relays can be duplicates; print what came back
        echo_json(sent)
    elif as_json:
        echo_json(_dump(sent))
    else:
        click.echo(f"Sent {sent.id} in session {sent.session_alias or sent.session_id}.")
        if sent.reply_address:
            click.echo(f"Reply address: {sent.reply_address}")


@click.command("inbox")
@click.option("--unread", is_flag=True, help="Only unread mail.")
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inbox(unread: bool, session_id: str | None, limit: int, as_json: bool) -> None:
    """List mail: an agent's inbox (oldest first) or your mailbox (newest first)."""

    async def fetch(client: AsyncClient) -> Page[InboxItem]:
        status = "unread" if unread else "all"
        return await client.inbox(status=status, session_id=session_id, limit=limit)

    page = run(fetch)
    if as_json:
        echo_json({"items": [_dump(item) for item in page.items], "next_cursor": page.next_cursor})
        return
    if not page.items:
        click.echo("No mail.")
    for item in page.items:
        click.echo(mail_line(item))
    if page.next_cursor:
        click.echo(f"(more: showing the first {len(page.items)})")


@click.command("read")
@click.argument("mail_id", metavar="ID")
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def read(mail_id: str, session_id: str | None, as_json: bool) -> None:
    """Show one mail with its full body."""

    async def fetch(client: AsyncClient) -> MailOut:
        limit = 0 if client.config.is_agent else None  # 0 = never truncate
        scope = scope_for(client, session_id)
        return await client.read_mail(mail_id, session_id=scope, body_limit=limit)

    mail = run(fetch)
    if as_json:
        echo_json(_dump(mail))
    else:
        click.echo(mail_text(mail))


@click.command("thread")
@click.argument("mail_id", metavar="ID")
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def thread(mail_id: str, session_id: str | None, as_json: bool) -> None:
    """Show every mail of the session ID belongs to, oldest first."""

    async def fetch(client: AsyncClient) -> Page[MailOut]:
        return await client.thread(mail_id, session_id=scope_for(client, session_id))

    page = run(fetch)
    if as_json:
        echo_json([_dump(mail) for mail in page.items])
        return
    click.echo(f"\n{'─' * 60}\n".join(mail_text(mail) for mail in page.items))
