"""``agentmail backup DEST`` and ``agentmail restore SRC DATA_DIR`` (docs/backup.md)."""

from __future__ import annotations

from pathlib import Path

import click

DATA_DIR = click.option(
    "--data-dir",
    default="./agentmail-data",
    show_default=True,
    envvar="AGENTMAIL_DATA_DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="The gateway's data dir (its database and blobs).",
)
DATABASE_URL = click.option(
    "--database-url",
    default=None,
    envvar="AGENTMAIL_DATABASE_URL",
    help="PostgreSQL URL (postgresql://…); default: SQLite in the data dir.",
)


def _pg(url: str | None) -> str | None:
    if url is None:
        return None
    if not url.startswith(("postgresql://", "postgresql+asyncpg://", "postgres://")):
        raise click.BadParameter("a postgresql://… URL", param_hint="--database-url")
    return url


@click.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@DATA_DIR
@DATABASE_URL
def backup(dest: Path, data_dir: Path, database_url: str | None) -> None:
    """Back up the gateway of --data-dir into the new directory DEST, while it runs:
    the database (SQLite's online backup API, or pg_dump), the blobs it names and
    the data dir's key files, with a manifest of SHA-256 sums."""
    from mailui4agents.ops.backup import BackupError
    from mailui4agents.ops.backup import backup as run_backup

    try:
        report = run_backup(data_dir, dest, _pg(database_url))
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    m = report.manifest
    counts = ", ".join(f"{n} {t}" for t, n in m.counts.items())
    click.echo(
        f"Backed up {m.database} schema {m.schema_revision} to {report.path}: "
        f"{len(m.files)} files; {counts}"
    )


@click.command("restore")
@click.argument("src", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option(
    "--database-url",
    default=None,
    help="For a PostgreSQL backup: the empty database to restore into (pg_restore).",
)
def restore(src: Path, data_dir: Path, database_url: str | None) -> None:
    """Restore the backup SRC into DATA_DIR, which must be new or empty and not in
    use by a gateway. Every file's SHA-256 is checked before anything is written."""
    from mailui4agents.ops.backup import BackupError
    from mailui4agents.ops.restore import restore as run_restore

    try:
        report = run_restore(src, data_dir, _pg(database_url))
    except BackupError as exc:
        done = "" if "restored already" in str(exc) else "; nothing was restored"
        raise click.ClickException(f"{exc}{done}") from exc
    m = report.manifest
    hint = " --database-url <the same URL>" if database_url else ""
    click.echo(
        f"Restored the backup of {m.created_at} (schema {m.schema_revision}) into "
        f"{report.data_dir}. Start it: agentmail serve --data-dir {report.data_dir}{hint}"
    )
