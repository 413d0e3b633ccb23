"""``agentmail workspace alias add|list|remove``: the workspace aliases of new
work by e-mail (docs/email.md, "New work by e-mail"); a mail to
`claude+shop@domain` starts a session of agent claude in the workspace named
`shop`. Admins only, with a person's login."""

from __future__ import annotations

import click

from mailui4agents.cli.common import echo_json, people_only, run
from mailui4agents.client import AsyncClient
from mailui4agents.client import workspace_aliases as aliases
from mailui4agents.wire.email import WorkspaceAliasOut

WHAT = "workspace aliases"


@click.group("workspace")
def workspace() -> None:
    """Workspaces by name: the aliases of new work by e-mail (admin only)."""


@workspace.group("alias")
def alias() -> None:
    """Name a workspace for new work by e-mail: agent+ALIAS@domain (admin only)."""


@alias.command("add")
@click.argument("name")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the alias as JSON.")
def alias_add(name: str, path: str, as_json: bool) -> None:
    """Name the workspace PATH (absolute) NAME: a-z, 0-9 and '-' (again: a new PATH)."""
    people_only(WHAT)

    async def act(client: AsyncClient) -> WorkspaceAliasOut:
        return await aliases.put(client, name, path)

    item = run(act)
    if as_json:
        echo_json(item)
        return
    click.echo(f"{item.alias} is {item.workspace}: mail AGENT+{item.alias}@ to start work there.")


@alias.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def alias_list(as_json: bool) -> None:
    """List the workspace aliases."""
    people_only(WHAT)

    async def act(client: AsyncClient) -> list[WorkspaceAliasOut]:
        return await aliases.list_all(client)

    items = run(act)
    if as_json:
        echo_json(items)
        return
    if not items:
        click.echo("No workspace aliases. Add one: agentmail workspace alias add ALIAS PATH")
    for item in items:
        click.echo(f"{item.alias}  {item.workspace}")


@alias.command("remove")
@click.argument("name")
def alias_remove(name: str) -> None:
    """Remove the alias NAME (sessions started through it keep their workspace)."""
    people_only(WHAT)

    async def act(client: AsyncClient) -> None:
        await aliases.remove(client, name)

    run(act)
    click.echo(f"Removed {name}.")
