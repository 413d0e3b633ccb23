"""``agentmail user ...`` and ``agentmail agent ...``: administration (admin only)."""

from __future__ import annotations

import click

from mailui4agents.cli.common import echo_json, run
from mailui4agents.client import AsyncClient
from mailui4agents.wire.models import AgentCreated, UserCreated, to_json


@click.group("user")
def user() -> None:
    """Manage people (admin only)."""


@user.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make the new user an administrator.")
@click.option(
    "--password",
    envvar="AGENTMAIL_NEW_PASSWORD",
    help="The new user's password (else $AGENTMAIL_NEW_PASSWORD, else asked twice).",
)
def user_add(name: str, admin: bool, password: str | None) -> None:
    """Create the user NAME."""
    if not password:
        password = click.prompt(
            f"Password for {name}", hide_input=True, confirmation_prompt=True, err=True
        )
    secret = str(password)

    async def create(client: AsyncClient) -> UserCreated:
        return await client.admin_create_user(name, secret, is_admin=admin)

    created = run(create)
    role = "administrator" if created.is_admin else "user"
    click.echo(f"Created {role} {created.username}.")


@user.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def user_list(as_json: bool) -> None:
    """List every user."""
    users = run(lambda client: client.admin_list_users())
    if as_json:
        echo_json(users)
        return
    for item in users:
        flag = "  (admin)" if item.is_admin else ""
        click.echo(f"{item.username}{flag}")


@click.group("agent")
def agent() -> None:
    """Manage agents and their keys (admin only)."""


@agent.command("add")
@click.argument("name")
@click.option(
    "--workspace",
    "workspaces",
    multiple=True,
    metavar="PATH",
    help="A workspace (project directory) the agent works in; repeatable.",
)
@click.option(
    "--owner",
    "owners",
    multiple=True,
    metavar="USER",
    help="A person who sees and adopts the agent's platform sessions; repeatable (default: you).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {name, key, created_at} as JSON.")
def agent_add(
    name: str, workspaces: tuple[str, ...], owners: tuple[str, ...], as_json: bool
) -> None:
    """Create the agent NAME and print its key (shown only this once)."""

    async def create(client: AsyncClient) -> AgentCreated:
        return await client.admin_create_agent(name, list(workspaces) or None, list(owners) or None)

    created = run(create)
    if as_json:
        shown = to_json(created)
        echo_json({k: shown.get(k) for k in ("name", "key", "created_at")})
        return
    _print_key(created.name, created.key, "Created agent")


@agent.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def agent_list(as_json: bool) -> None:
    """List every agent (no keys)."""
    agents = run(lambda client: client.admin_list_agents())
    if as_json:
        echo_json(agents)
        return
    for item in agents:
        workspaces = ", ".join(str(path) for path in item.workspaces or [])
        click.echo(f"{item.name}  {workspaces}".rstrip())


@agent.command("owners")
@click.argument("name")
@click.option("--add", "add", metavar="USER", help="Make USER an owner of the agent.")
@click.option("--remove", "remove", metavar="USER", help="Remove USER from its owners.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def agent_owners(name: str, add: str | None, remove: str | None, as_json: bool) -> None:
    """Show (or change) who owns agent NAME: only owners see and adopt its platform
    sessions."""
    owners = run(lambda client: client.admin_agent_owners(name, add=add, remove=remove))
    if as_json:
        echo_json(owners)
        return
    for item in owners:
        click.echo(f"{item.username}  (added by {item.added_by})")


@agent.command("rotate-key")
@click.argument("name")
@click.option(
    "--grace",
    "grace_s",
    type=click.IntRange(0, 30 * 86400),
    default=0,
    show_default=True,
    help="Seconds the old keys keep working (0: they stop now).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def agent_rotate_key(name: str, grace_s: int, as_json: bool) -> None:
    """Give agent NAME a new key (printed once); its old keys stop working now,
    or after --grace seconds."""
    created = run(lambda client: client.admin_rotate_key(name, grace_s))
    if as_json:
        echo_json(created)
        return
    _print_key(name, created.key, "New key for agent")


@agent.command("revoke-key")
@click.argument("name")
@click.argument("key_id")
def agent_revoke_key(name: str, key_id: str) -> None:
    """Revoke the key KEY_ID of agent NAME."""
    run(lambda client: client.admin_revoke_key(name, key_id))
    click.echo(f"Revoked key {key_id} of agent {name}.")


def _print_key(name: str, key: str, headline: str) -> None:
    click.echo(f"{headline} {name}. Its key is shown only this once; store it now:\n")
    click.echo(f"  {key}\n")
    click.echo(f"Give it to the agent as AGENTMAIL_KEY (with AGENTMAIL_AGENT={name}).")
