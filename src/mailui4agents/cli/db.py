"""``agentmail db copy``: move an installation to another database (docs/postgres.md);
``agentmail db check``: is a database fit to run on (docs/behaviour.md#operations)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("db")
def db() -> None:
    """Database maintenance (copy: with the gateway stopped; check: any time)."""


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


@db.command("check")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path("agentmail-data"),
    show_default=True,
    envvar="AGENTMAIL_DATA_DIR",
    help="The gateway's data dir (its SQLite database and blobs).",
)
@click.option("--database-url", default=None, envvar="AGENTMAIL_DATABASE_URL", help="PostgreSQL")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of lines.")
def check(data_dir: Path, database_url: str | None, as_json: bool) -> None:
    """Schema version, size, integrity and orphans, read-only (safe beside a running
    gateway). Exit 0 when healthy, 1 when anything needs attention."""
    import dataclasses
    import json

    import anyio

    from mailui4agents.services.blobs import BlobStore
    from mailui4agents.services.db_check import check as run_check
    from mailui4agents.settings import Settings

    settings = Settings(data_dir=data_dir, database_url=database_url)
    url = settings.resolved_database_url()
    if database_url is None and not (data_dir / "agentmail.db").exists():
        raise click.ClickException(f"no database at {data_dir / 'agentmail.db'}")
    report = anyio.run(run_check, url, BlobStore.for_settings(settings))
    if as_json:
        click.echo(json.dumps({**dataclasses.asdict(report), "healthy": report.healthy}))
    else:
        click.echo(f"backend    {report.backend}")
        schema = f"{report.revision or '-'} ({report.schema}; this version: {report.head})"
        click.echo(f"schema     {schema}")
        click.echo(f"size       {report.size_bytes} bytes")
        click.echo(f"integrity  {report.integrity}")
        for f in report.findings:
            click.echo(f"orphans    {f.count} {f.what}: {', '.join(f.examples)}")
        click.echo("healthy" if report.healthy else "needs attention")
    if not report.healthy:
        raise SystemExit(1)
