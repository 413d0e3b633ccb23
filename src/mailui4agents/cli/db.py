"""``agentmail db copy``: move an installation to another database (docs/postgres.md)."""

from __future__ import annotations

import click


@click.group("db")
def db() -> None:
    """Database maintenance (run with the gateway stopped)."""


@db.command("copy")
@click.option("--from", "src", required=True, help="Source URL, e.g. sqlite:///data/agentmail.db")
@click.option("--to", "dst", required=True, help="Target URL, e.g. postgresql://u@host/agentmail")
def copy(src: str, dst: str) -> None:
    """Copy every table (mail, sessions, events with their ids, grants, keys,
    attachment metadata) into an empty target, then compare row counts."""
    import anyio

    from mailui4agents.db.copy import CopyError, copy_database
    from mailui4agents.settings import Settings

    def url(value: str) -> str:
        return Settings(database_url=value).resolved_database_url()

    try:
        report = anyio.run(copy_database, url(src), url(dst))
    except CopyError as e:
        raise click.ClickException(str(e)) from e
    for table, n in report.counts.items():
        click.echo(f"  {table:20} {n:8d}")
    click.echo(
        f"Copied {report.total} rows; every table's count verified. "
        "Attachment bytes stay in the data dir: start the new gateway with the same --data-dir."
    )
