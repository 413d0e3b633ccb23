"""``agentmail schedule`` and ``agentmail calendar``: mail sent later, once or by
an RRULE (docs/behaviour.md#calendar)."""

from __future__ import annotations

import sys
from typing import Any

import click

from mailui4agents.cli.common import echo_json, run, session_option
from mailui4agents.cli.mail import resolve_body
from mailui4agents.cli.output import one_line, when
from mailui4agents.client import AsyncClient
from mailui4agents.client.calendar import Calendar
from mailui4agents.wire.calendar import CalendarEntryOut
from mailui4agents.wire.models import Page


def _dump(entry: CalendarEntryOut) -> dict[str, Any]:
    return entry.model_dump(mode="json", by_alias=True, exclude_none=True)


def entry_line(e: CalendarEntryOut) -> str:
    """One calendar row: id, status, next time (UTC), repeat rule, recipients, subject."""
    nxt = when(e.next_due) + " UTC" if e.next_due else "-"
    rule = e.rrule or "once"
    return f"{e.id}  {e.status:<9}  {nxt:<20}  {rule}  {', '.join(e.to)}  {one_line(e.subject)}"


def entry_text(e: CalendarEntryOut) -> str:
    lines = [
        f"Id:        {e.id}",
        f"Status:    {e.status}" + (f" ({e.last_error})" if e.last_error else ""),
        f"To:        {', '.join(e.to)}",
        f"Subject:   {e.subject}",
        f"Starts:    {e.start_at} ({e.timezone})",
        f"Repeats:   {e.rrule or 'no'}",
        f"Delivered: {e.delivered}",
    ]
    lines += [f"Next:      {when(at)} UTC" for at in e.upcoming]
    for o in e.occurrences or []:
        late = " late" if o.late else ""
        what = o.mail_id or f"failed: {o.error}"
        lines.append(f"Sent:      {when(o.due_at)} UTC{late} → {what}")
    return "\n".join(lines)


@click.command("schedule")
@click.option("--to", "to", multiple=True, required=True, metavar="ADDR", help="Repeatable.")
@click.option("--cc", multiple=True, metavar="ADDR", help="Repeatable.")
@click.option("--subject", required=True)
@click.option("--body", help="The body text.")
@click.option(
    "--body-file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Read the body from this file ('-' for stdin).",
)
@click.option(
    "--at",
    "start_at",
    required=True,
    metavar="WHEN",
    help="ISO 8601, e.g. 2027-03-29T09:00 (wall-clock time in --tz) or …Z / …+02:00.",
)
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--rrule", metavar="RULE", help='Repeat, RFC 5545: "FREQ=WEEKLY;BYDAY=MO".')
@click.option(
    "--attach",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="Attach this file (repeatable); uploaded now, sent at each occurrence.",
)
@click.option(
    "--mode",
    type=click.Choice(["plan", "workspace", "full"]),
    help="Permission mode of a session this mail starts (people only).",
)
@session_option
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
def schedule(
    to: tuple[str, ...],
    cc: tuple[str, ...],
    subject: str,
    body: str | None,
    body_file: str | None,
    start_at: str,
    timezone: str,
    rrule: str | None,
    attach: tuple[str, ...],
    mode: str | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Schedule a mail for later, once or repeating."""
    text = resolve_body(body, body_file, sys.stdin)

    async def create(client: AsyncClient) -> CalendarEntryOut:
        ids = [(await client.upload_attachment(path)).attachment_id for path in attach]
        return await Calendar(client).schedule(
            list(to),
            subject,
            text,
            start_at,
            timezone=timezone,
            rrule=rrule,
            cc=list(cc) or None,
            attachment_ids=ids or None,
            permission_mode=mode,
            from_session_id=session_id if client.config.is_agent else None,
        )

    entry = run(create)
    if as_json:
        echo_json(_dump(entry))
        return
    first = when(entry.upcoming[0]) + " UTC" if entry.upcoming else "-"
    click.echo(f"Scheduled {entry.id}: first at {first}.")


@click.group("calendar", invoke_without_command=True)
@click.option("--status", type=click.Choice(["scheduled", "done", "cancelled", "failed"]))
@click.option("--everyone", is_flag=True, help="Admins: every creator's entries.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def calendar(ctx: click.Context, status: str | None, everyone: bool, as_json: bool) -> None:
    """List your calendar (upcoming first); `calendar show|cancel|edit ID`."""
    if ctx.invoked_subcommand is not None:
        return

    async def fetch(client: AsyncClient) -> Page[CalendarEntryOut]:
        return await Calendar(client).list(status=status, everyone=everyone, limit=500)

    page = run(fetch)
    if as_json:
        echo_json({"items": [_dump(e) for e in page.items], "next_cursor": page.next_cursor})
        return
    if not page.items:
        click.echo("Nothing scheduled.")
    for e in page.items:
        click.echo(entry_line(e))


@calendar.command("show")
@click.argument("entry_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(entry_id: str, as_json: bool) -> None:
    """One entry, its next occurrences and what was delivered."""
    entry = run(lambda client: Calendar(client).get(entry_id))
    if as_json:
        echo_json(_dump(entry))
    else:
        click.echo(entry_text(entry))


@calendar.command("cancel")
@click.argument("entry_id", metavar="ID")
def cancel(entry_id: str) -> None:
    """Cancel an entry: nothing more is sent."""
    entry = run(lambda client: Calendar(client).cancel(entry_id))
    click.echo(f"Cancelled {entry.id}.")


@calendar.command("edit")
@click.argument("entry_id", metavar="ID")
@click.option("--to", "to", multiple=True, metavar="ADDR", help="New recipients (repeatable).")
@click.option("--subject")
@click.option("--body")
@click.option("--at", "start_at", metavar="WHEN")
@click.option("--tz", "timezone")
@click.option("--rrule", metavar="RULE", help='"" makes it one-off.')
@click.option("--resume", is_flag=True, help="Schedule a failed entry again.")
def edit(
    entry_id: str,
    to: tuple[str, ...],
    subject: str | None,
    body: str | None,
    start_at: str | None,
    timezone: str | None,
    rrule: str | None,
    resume: bool,
) -> None:
    """Change an entry; only the options given change."""
    fields: dict[str, Any] = {
        k: v
        for k, v in {
            "to": list(to) or None,
            "subject": subject,
            "body": body,
            "start_at": start_at,
            "timezone": timezone,
            "status": "scheduled" if resume else None,
        }.items()
        if v is not None
    }
    if rrule is not None:
        fields["rrule"] = rrule or None
    if not fields:
        raise click.UsageError("nothing to change: give at least one option")
    entry = run(lambda client: Calendar(client).update(entry_id, **fields))
    click.echo(f"Updated {entry.id}: {entry_line(entry)}")
