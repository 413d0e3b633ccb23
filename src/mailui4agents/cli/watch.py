"""``agentmail watch``: print live events until Ctrl-C."""

from __future__ import annotations

from contextlib import aclosing, suppress

import click

from mailui4agents.cli.common import run
from mailui4agents.cli.output import event_json, event_line
from mailui4agents.client import ApiError, AsyncClient


def _report_retry(error: ApiError | None, delay: float) -> None:
    if error is not None:  # a stream that merely ended is routine; stay quiet
        click.echo(f"{error.message}; retrying in {delay:.1f} s", err=True)


@click.command("watch")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@click.option("--since", type=int, metavar="ID", help="Replay events after this event id first.")
def watch(as_json: bool, since: int | None) -> None:
    """Print live events, one line each, until Ctrl-C."""

    async def follow(client: AsyncClient) -> None:
        async with aclosing(client.events(since, on_retry=_report_retry)) as stream:
            async for event in stream:
                click.echo(event_json(event) if as_json else event_line(event))

    with suppress(KeyboardInterrupt):  # Ctrl-C is how watching ends
        run(follow)
