"""``agentmail user ...`` and ``agentmail agent ...``: administration (admin only)."""

from __future__ import annotations

import sys

import click

from mailui4agents.cli import email as email_cli
from mailui4agents.cli.common import echo_json, run
from mailui4agents.client import AsyncClient
from mailui4agents.wire.models import AgentCreated, UserCreated, to_json


@click.group("user")
def user() -> None:
    """Manage people (admin only); `user email`: your own e-mail addresses."""


user.add_command(email_cli.email)  # agentmail user email …: your own addresses


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


@user.command("admin")
@click.argument("name")
@click.option("--revoke", is_flag=True, help="Take the admin role back instead.")
def user_admin(name: str, revoke: bool) -> None:
    """Make the user NAME an administrator (or, with --revoke, no longer one)."""
    from mailui4agents.client import admin_users

    changed = run(lambda client: admin_users.set_admin(client, name, not revoke))
    role = "an administrator" if changed.is_admin else "no administrator"
    click.echo(f"{changed.username} is {role}.")


@user.command("password")
@click.argument("name")
@click.option(
    "--password",
    envvar="AGENTMAIL_NEW_PASSWORD",
    help="The new password (else $AGENTMAIL_NEW_PASSWORD, else asked twice).",
)
def user_password(name: str, password: str | None) -> None:
    """Set a new password for the user NAME; its logins and API tokens end."""
    from mailui4agents.client import admin_users

    if not password:
        password = click.prompt(
            f"New password for {name}", hide_input=True, confirmation_prompt=True, err=True
        )
    secret = str(password)
    changed = run(lambda client: admin_users.reset_password(client, name, secret))
    click.echo(f"New password set for {changed.username}; their logins ended.")


@click.group("agent")
def agent() -> None:
    """Manage agents and their keys (admin only); who may set them to work (owners too)."""


WORKSPACE_HELP = (
    "A workspace root: a folder (glob) mail may set the agent to work in, e.g. "
    "'/srv/*' or '/home/ana/src/**'; repeatable (docs/access.md)."
)


@agent.command("add")
@click.argument("name")
@click.option("--workspace", "workspaces", multiple=True, metavar="GLOB", help=WORKSPACE_HELP)
@click.option(
    "--owner",
    "owners",
    multiple=True,
    metavar="USER",
    help="A person who sees and adopts the agent's platform sessions and sets it to work; "
    "repeatable (default: you).",
)
@click.option(
    "--tasker",
    "taskers",
    multiple=True,
    metavar="USER",
    help="Another person who may set the agent to work; repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print {name, key, created_at} as JSON.")
def agent_add(
    name: str,
    workspaces: tuple[str, ...],
    owners: tuple[str, ...],
    taskers: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create the agent NAME and print its key (shown only this once)."""
    roots = list(workspaces)
    if not roots and not as_json and sys.stdin is not None and sys.stdin.isatty():
        answer = click.prompt(
            "Workspace roots (where mail may set it to work; globs, space-separated; "
            "empty: nowhere yet)",
            default="",
            show_default=False,
            err=True,
        )
        roots = answer.split()

    async def create(client: AsyncClient) -> AgentCreated:
        return await client.admin_create_agent(
            name, roots or None, list(owners) or None, list(taskers) or None
        )

    created = run(create)
    if not roots:
        click.echo(
            f"warning: {name} has no workspace roots and works nowhere until an owner "
            f"sets them: agentmail agent set {name} --workspace GLOB",
            err=True,
        )
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


@agent.command("taskers")
@click.argument("name")
@click.option("--add", "add", metavar="USER", help="Let USER set the agent to work.")
@click.option("--remove", "remove", metavar="USER", help="Take that from USER.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def agent_taskers(name: str, add: str | None, remove: str | None, as_json: bool) -> None:
    """Show (or change) who may set agent NAME to work: its owners and the taskers
    they add (owners and admins only)."""
    found = run(lambda client: client.agent_taskers(name, add=add, remove=remove))
    if as_json:
        echo_json(found)
        return
    for item in found:
        click.echo(f"{item.name}  {item.role}  (added by {item.added_by})")


MODE = click.Choice(["plan", "workspace", "full"])


@agent.command("set")
@click.argument("name")
@click.option("--workspace", "workspaces", multiple=True, metavar="GLOB", help=WORKSPACE_HELP)
@click.option("--no-workspaces", is_flag=True, help="Remove every root: it works nowhere.")
@click.option("--max-mode-owners", type=MODE, help="The highest mode its owners may start.")
@click.option("--max-mode-taskers", type=MODE, help="The highest mode its other taskers may start.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent as JSON.")
def agent_set(
    name: str,
    workspaces: tuple[str, ...],
    no_workspaces: bool,
    max_mode_owners: str | None,
    max_mode_taskers: str | None,
    as_json: bool,
) -> None:
    """Set where agent NAME may be set to work (the --workspace roots replace the
    old ones) and how freely; without options, show them (owners and admins only)."""
    if no_workspaces and workspaces:
        raise click.UsageError("--no-workspaces and --workspace exclude each other")
    roots = [] if no_workspaces else (list(workspaces) or None)
    out = run(
        lambda client: client.update_agent(
            name,
            workspaces=roots,
            max_mode_owners=max_mode_owners,
            max_mode_taskers=max_mode_taskers,
        )
    )
    if as_json:
        echo_json(out)
        return
    click.echo(f"{out.name}")
    click.echo(f"  workspace roots: {', '.join(out.workspaces or []) or '(none: works nowhere)'}")
    if out.max_mode is not None:
        click.echo(f"  highest mode: owners {out.max_mode.owners}, taskers {out.max_mode.taskers}")
    click.echo(f"  taskers: {', '.join(f'{t.name} ({t.role})' for t in out.taskers)}")


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
