"""``agentmail login``: get a personal API token and store it for later commands."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mailui4agents.cli.common import echo_json, fail, load_config, people_only, run
from mailui4agents.client import AsyncClient, ClientConfig
from mailui4agents.client.config import config_path, read_config_file, write_config_file
from mailui4agents.client.errors import ApiError
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.models import TokenOut


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


@click.command("tokens")
@click.option("--revoke", "revoke_ids", multiple=True, metavar="ID", help="Revoke this token.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def tokens(revoke_ids: tuple[str, ...], as_json: bool) -> None:
    """List your API tokens (or revoke some with --revoke ID)."""

    async def act(client: AsyncClient) -> list[TokenOut]:
        for token_id in revoke_ids:
            await client.revoke_token(token_id)
        return [] if revoke_ids else await client.list_tokens()

    items = run(act)
    for token_id in revoke_ids:
        click.echo(f"Revoked token {token_id}.")
    if revoke_ids:
        return
    if as_json:
        echo_json(items)
        return
    for item in items:
        mark = "  (this CLI)" if item.current else ""
        expires = rfc3339(item.expires_at) if item.expires_at else "never"
        click.echo(f"{item.id}  {item.name}  expires {expires}{mark}")


@click.command("logout")
def logout() -> None:
    """Revoke the CLI's stored token at the gateway and delete it here."""
    config = people_only("logout")
    if os.environ.get("AGENTMAIL_TOKEN"):
        fail("the token comes from AGENTMAIL_TOKEN: revoke it with `agentmail tokens --revoke ID`")
    if not config.token:
        fail("not logged in: no token is stored")

    async def revoke_current(client: AsyncClient) -> bool:
        try:
            current = [t for t in await client.list_tokens() if t.current]
        except ApiError as error:
            if error.status == 401:
                return False  # already revoked or expired: only the local copy is left
            raise
        for item in current:
            await client.revoke_token(item.id)
        return bool(current)

    revoked = run(revoke_current, config=config)
    path = config_path()
    stored = read_config_file(path)
    stored.pop("token", None)
    write_config_file(stored, path, merge=False)
    said = "revoked and deleted" if revoked else "deleted (it no longer worked)"
    click.echo(f"Logged out of {config.url}: the token was {said} from {path}.")
