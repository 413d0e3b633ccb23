"""``agentmail login``: get a personal API token and store it for later commands."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mailui4agents.cli.common import load_config, run
from mailui4agents.client import AsyncClient, ClientConfig
from mailui4agents.client.config import config_path, read_config_file, write_config_file


def save_login(url: str, username: str, token: str, path: Path | None = None) -> Path:
    """Store ``url``, ``username`` and ``token`` in the config file (mode 0600).

    A key stored earlier is dropped: it would otherwise win over the new token.
    """
    target = path if path is not None else config_path()
    stored = read_config_file(target)
    for stale in ("key", "agent_name"):
        stored.pop(stale, None)
    stored.update(url=url, username=username, token=token)
    return write_config_file(stored, target, merge=False)


@click.command("login")
@click.option("--url", help="Gateway URL (default: $AGENTMAIL_URL, the stored one, or local).")
@click.option("--username", help="Your user name (asked when missing).")
@click.option(
    "--password", envvar="AGENTMAIL_PASSWORD", help="Your password (else $AGENTMAIL_PASSWORD)."
)
def login(url: str | None, username: str | None, password: str | None) -> None:
    """Log in and store an API token for the CLI."""
    gateway = (url or load_config().url).rstrip("/")
    name = username or str(click.prompt("Username", err=True))
    secret = password or str(click.prompt("Password", hide_input=True, err=True))

    async def get_token(client: AsyncClient) -> str:
        return await client.login(name, secret)

    token = run(get_token, config=ClientConfig(url=gateway), need_credential=False)
    path = save_login(gateway, name, token)
    click.echo(f"Logged in to {gateway} as {name}; token stored in {path}.")
    overriding = [var for var in ("AGENTMAIL_KEY", "AGENTMAIL_TOKEN") if os.environ.get(var)]
    if overriding:
        click.echo(f"note: {' and '.join(overriding)} in your environment wins over it.", err=True)
