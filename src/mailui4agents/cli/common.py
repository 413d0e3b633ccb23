"""What every client-side command shares: config, running the async client, errors."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import anyio
import click
import httpx
from click.core import ParameterSource
from pydantic import BaseModel

from mailui4agents.client import ApiError, AsyncClient, ClientConfig
from mailui4agents.wire.models import to_json

T = TypeVar("T")

NOT_LOGGED_IN = (
    "not logged in: run `agentmail login`, or set AGENTMAIL_TOKEN (people) "
    "or AGENTMAIL_KEY (agents)"
)


def fail(message: str) -> NoReturn:
    """Print ``message`` to stderr and exit with status 1."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(1)


def load_config() -> ClientConfig:
    """The config from env and the config file; a broken file is a clean error."""
    try:
        return ClientConfig.load()
    except (OSError, ValueError) as error:
        fail(f"cannot read the agentmail config: {error}")


def describe(error: ApiError, *, credential_used: bool = True) -> str:
    """The gateway's message, plus what to do where that is obvious.

    The field the gateway blames (e.g. ``to[0]``) leads the message unless the
    message already names it. The "log in again" hint only makes sense when a
    stored or exported credential was refused, not when a login itself failed.
    """
    message = error.message
    if error.field and error.field not in message:
        message = f"{error.field}: {message}"
    if error.accepted_fields:
        message += f" (accepted: {', '.join(error.accepted_fields)})"
    if error.status == 401 and credential_used:
        message += " — log in again with `agentmail login`, or check AGENTMAIL_KEY"
    return message


def people_only(what: str) -> ClientConfig:
    """The CLI's configuration, or fail when it holds an agent key: `what` is for
    people (the commands of a person's own settings, devices and logins)."""
    config = load_config()
    if config.is_agent:
        fail(f"{what} is for people: this CLI uses an agent key (AGENTMAIL_KEY)")
    return config


def run(
    action: Callable[[AsyncClient], Awaitable[T]],
    *,
    config: ClientConfig | None = None,
    need_credential: bool = True,
    transport: httpx.AsyncBaseTransport | None = None,
) -> T:
    """Run ``action`` with a client in a fresh event loop; gateway errors exit 1."""
    settings = config if config is not None else load_config()
    if need_credential and not settings.credential:
        fail(NOT_LOGGED_IN)

    async def main() -> T:
        async with AsyncClient(settings, transport=transport) as client:
            return await action(client)

    try:
        return anyio.run(main)
    except ApiError as error:
        fail(describe(error, credential_used=need_credential))
    except ValueError as error:  # an option this kind of principal cannot use
        fail(str(error))


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON (datetimes and other objects as strings). A
    wire model (or a list of them) prints as the JSON the gateway answered."""
    if isinstance(value, BaseModel):
        value = to_json(value)
    elif isinstance(value, list):
        value = [to_json(v) if isinstance(v, BaseModel) else v for v in value]
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


SESSION_HELP = (
    "Agents: the session you work in (default $AGENTMAIL_SESSION_ID); reads beyond your own "
    "mail stay in its workspace."
)


def session_option(f: Any) -> Any:
    return click.option(
        "--session", "session_id", metavar="ID", envvar="AGENTMAIL_SESSION_ID", help=SESSION_HELP
    )(f)


def scope_for(client: AsyncClient, session_id: str | None) -> str | None:
    """The scope to send. $AGENTMAIL_SESSION_ID means nothing to people, so it is
    dropped for them; an explicit --session from a person stays (and is refused)."""
    if client.config.is_agent or session_id is None:
        return session_id
    source = click.get_current_context().get_parameter_source("session_id")
    return None if source == ParameterSource.ENVIRONMENT else session_id
