"""``agentmail audit``: the decisions on your sessions' tool calls and questions,
newest first — who or what decided, through which channel and device, when, and
how long the agent waited (docs/audit.md). Admins see every session's. A
person's command: an agent key is refused before anything is sent."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from mailui4agents.cli.approvals import run_as_person
from mailui4agents.cli.common import echo_json
from mailui4agents.cli.output import one_line
from mailui4agents.client import AsyncClient
from mailui4agents.client import audit as audit_calls
from mailui4agents.domain.decided_via import actor_text
from mailui4agents.domain.times import parse_rfc3339, rfc3339
from mailui4agents.wire.models import to_json

_AGO = re.compile(r"^(\d{1,6})([smhd])$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def since_time(value: str, now: datetime | None = None) -> str:
    """``--since``: ``30m``, ``2h``, ``7d`` ago, or an RFC 3339 time (``Z`` assumed
    without an offset), as the RFC 3339 time the API takes."""
    try:
        found = _AGO.match(value.strip())
        if found:
            ago = timedelta(**{_UNIT[found.group(2)]: int(found.group(1))})
            return rfc3339((now or datetime.now(UTC)) - ago)
        when = parse_rfc3339(value.strip())
    except (ValueError, OverflowError):
        raise click.BadParameter(
            "give 30m, 2h, 7d or a time such as 2026-12-03T09:00:00Z", param_hint="--since"
        ) from None
    return rfc3339(when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC))


def who_decided(item: dict[str, Any]) -> str:
    """``ana (push, Ana's phone)``, ``rule r-7``, ``grant 5f…``, ``mode full``, ``timeout``."""
    by = item["decided_by"]
    name = by.get("name") or by.get("id")
    return actor_text(by["kind"], name, by.get("channel"), by.get("device"))


def audit_line(item: dict[str, Any]) -> str:
    """One row of ``agentmail audit``."""
    when = item["decided_at"][:19].replace("T", " ")
    what = item.get("tool_name") or item["kind"]
    if item.get("summary"):
        what += f": {item['summary']}"
    waited = item["waited_ms"] / 1000
    return (
        f"{when}  {item['outcome']:<12} {item['agent']:<12} {one_line(what)}"
        f"  — {one_line(who_decided(item))}, waited {waited:.1f} s"
    )


@click.command("audit")
@click.option(
    "--since", metavar="WHEN", help="Only decisions since: 30m, 2h, 7d or an RFC 3339 time."
)
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option("--agent", metavar="NAME", help="Only requests of this agent.")
@click.option("--person", metavar="NAME", help="Only decisions this person made.")
@click.option("--outcome", metavar="OUTCOME", help="approved, denied, expired, mode_allows…")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def audit(
    since: str | None,
    session_id: str | None,
    agent: str | None,
    person: str | None,
    outcome: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The decisions on what agents asked, newest first (docs/audit.md)."""
    after = since_time(since) if since is not None else None

    async def fetch(client: AsyncClient) -> list[dict[str, Any]]:
        found = await audit_calls.page(
            client, session_id=session_id, agent=agent, person=person, outcome=outcome,
            since=after, limit=limit,
        )  # fmt: skip
        return [to_json(item) for item in found.items]

    items = run_as_person(fetch)
    if as_json:
        echo_json(items)
        return
    if not items:
        click.echo("No decisions.")
        return
    for item in items:
        click.echo(audit_line(item))
