"""``agentmail export SESSION``: a session as real mail (docs/email.md,
"Export"), an mbox file or one .eml file per mail, with the Message-IDs and
threading headers of the e-mails the gateway sends."""

from __future__ import annotations

import mailbox
import re
import tempfile
from pathlib import Path

import click

from mailui4agents.cli.common import fail, people_only, run
from mailui4agents.client import AsyncClient
from mailui4agents.client.config import ClientConfig
from mailui4agents.client.export import Export, split_mbox


@click.command("export")
@click.argument("session_id")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mbox", "eml"]),
    default="mbox",
    show_default=True,
    help="One mbox file, or one .eml file per mail in a directory.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="mbox: the file (default session-ID.mbox); eml: the directory (default session-ID).",
)
def export(session_id: str, fmt: str, out: Path | None) -> None:
    """Write the session SESSION_ID as RFC 5322 messages, oldest first."""
    config = people_only("export")
    name = "session-" + re.sub(r"[^A-Za-z0-9_-]", "_", session_id)[:64]  # never a path
    if fmt == "mbox":
        target = out or Path(f"{name}.mbox")
        if target.exists():
            fail(f"{target} exists already: choose another --out")
        partial = target.with_name(target.name + ".part")

        try:
            _download(session_id, partial, config)
        except BaseException:  # a refusal (exit 1) or Ctrl-C: no half file left
            partial.unlink(missing_ok=True)
            raise
        partial.replace(target)
        click.echo(f"{len(mailbox.mbox(target, create=False))} messages written to {target}")
        return
    directory = out or Path(name)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        fail(f"{directory} exists and is not an empty directory: choose another --out")
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        box = Path(tmp) / "session.mbox"
        _download(session_id, box, config)
        files = split_mbox(box, directory)
    click.echo(f"{len(files)} messages written to {directory}/")


def _download(session_id: str, path: Path, config: ClientConfig) -> None:
    with path.open("wb") as out:

        async def act(client: AsyncClient) -> int:
            return await Export(client).mbox(session_id, out)

        run(act, config=config)
