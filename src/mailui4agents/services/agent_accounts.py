"""Agents as accounts: creating one, its owners, its keys, and how admins and
owners see it (AgentOut). Users, tokens and authentication: services/identity.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import AgentKeyRow, AgentOwnerRow, AgentRow, AgentTaskerRow, UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import conflict, invalid_value, not_found
from mailui4agents.services import tasking
from mailui4agents.services.identity import (
    AGENT_KEY_PREFIX,
    active,
    check_name,
    hash_token,
    name_taken,
    new_secret,
)
from mailui4agents.services.principals import principal_key
from mailui4agents.wire.models import AgentKeyOut, AgentOut, OwnerOut


async def create_agent(
    s: AsyncSession,
    name: str,
    workspaces: list[str] | None = None,
    *,
    creator: str,
    owners: list[str] | None = None,
    taskers: list[str] | None = None,
) -> tuple[AgentRow, str]:
    """A new agent with its first key. Its owners (who see and adopt its platform
    sessions, and set it to work) are `owners`, or the admin who creates it;
    `taskers`: further people who may set it to work; `workspaces`: its roots."""
    name = check_name(name, "name")
    if await name_taken(s, name):
        raise conflict(f"the name '{name}' is already taken")
    chosen = list(dict.fromkeys(owners if owners is not None else [creator]))
    await _check_users(s, chosen, "owners")
    picked = list(dict.fromkeys(taskers or ()))
    await _check_users(s, picked, "taskers")
    # The workspaces given at creation are the agent's roots (where mail may set
    # it to work); `workspaces` is what it reports itself, empty until it does.
    row = AgentRow(name=name, workspaces=[], workspace_roots=tasking.roots_of(workspaces or []))
    s.add(row)
    await s.flush()
    s.add_all(AgentOwnerRow(agent_id=row.id, username=u, added_by=creator) for u in chosen)
    s.add_all(
        AgentTaskerRow(agent_id=row.id, username=u, added_by=creator)
        for u in picked
        if u not in chosen
    )
    key = await issue_agent_key(s, row)
    return row, key


async def _check_users(s: AsyncSession, names: list[str], field: str) -> None:
    """Each name is a user (one query): Invalid naming the first that is not."""
    known = set(
        (await s.scalars(select(UserRow.username).where(UserRow.username.in_(names)))).all()
    )
    for i, n in enumerate(names):
        if n not in known:
            where = field if field == "name" else f"{field}[{i}]"
            raise invalid_value(where, f"no user is named '{n}'")


async def agent_owners(s: AsyncSession, agent: AgentRow) -> list[AgentOwnerRow]:
    return list(
        (
            await s.scalars(
                select(AgentOwnerRow)
                .where(AgentOwnerRow.agent_id == agent.id)
                .order_by(AgentOwnerRow.created_at, AgentOwnerRow.username)
            )
        ).all()
    )


async def add_agent_owner(s: AsyncSession, agent: AgentRow, username: str, by: str) -> None:
    await _check_users(s, [username], "name")
    if await s.get(AgentOwnerRow, (agent.id, username)) is None:
        s.add(AgentOwnerRow(agent_id=agent.id, username=username, added_by=by))
        await s.flush()


async def remove_agent_owner(s: AsyncSession, agent: AgentRow, username: str) -> None:
    row = await s.get(AgentOwnerRow, (agent.id, username))
    if row is None:
        raise not_found(f"owner '{username}' of agent '{agent.name}'")
    await s.delete(row)
    await s.flush()


def owner_out(row: AgentOwnerRow) -> OwnerOut:
    return OwnerOut(username=row.username, added_by=row.added_by, created_at=row.created_at)


async def issue_agent_key(s: AsyncSession, agent: AgentRow) -> str:
    key = new_secret(AGENT_KEY_PREFIX)
    s.add(AgentKeyRow(agent_id=agent.id, key_hash=hash_token(key), prefix=key[:14]))
    await s.flush()
    return key


async def get_agent(s: AsyncSession, name: str) -> AgentRow:
    row = await s.scalar(select(AgentRow).where(AgentRow.name == name))
    if row is None:
        raise not_found(f"agent '{name}'")
    return row


async def rotate_key(s: AsyncSession, name: str, grace_s: float = 0) -> str:
    """rotate_agent_key for the agent called `name` (404 for an unknown one): the
    admin API's and the admin page's "new key"."""
    return await rotate_agent_key(s, await get_agent(s, name), grace_s)


async def rotate_agent_key(s: AsyncSession, agent: AgentRow, grace_s: float = 0) -> str:
    """A new key; the agent's other keys stop working now (`grace_s` 0) or after
    `grace_s` seconds (a grace end already sooner stays)."""
    now = utcnow()
    old = active(AgentKeyRow.revoked_at, AgentKeyRow.expires_at, now)
    if grace_s <= 0:
        await s.execute(
            update(AgentKeyRow).where(AgentKeyRow.agent_id == agent.id, old).values(revoked_at=now)
        )
    else:
        end = now + timedelta(seconds=grace_s)
        await s.execute(
            update(AgentKeyRow)
            .where(AgentKeyRow.agent_id == agent.id, old)
            .where(or_(AgentKeyRow.expires_at.is_(None), AgentKeyRow.expires_at > end))
            .values(expires_at=end)
        )
    key = await issue_agent_key(s, agent)
    # Open streams of the old keys re-check now (and learn their grace end).
    s.info.setdefault("recheck", set()).add(principal_key(agent.name, False))
    return key


async def revoke_agent_key(s: AsyncSession, name: str, key_id: str) -> None:
    agent = await get_agent(s, name)
    result = await s.execute(
        update(AgentKeyRow)
        .where(AgentKeyRow.id == key_id, AgentKeyRow.agent_id == agent.id)
        .where(active(AgentKeyRow.revoked_at, AgentKeyRow.expires_at, utcnow()))
        .values(revoked_at=utcnow())
    )
    if result.rowcount == 0:  # type: ignore[attr-defined]
        raise not_found(f"active key '{key_id}' of agent '{name}'")
    # The agent's open streams re-check their key after the commit and end.
    s.info.setdefault("recheck", set()).add(principal_key(name, False))


SANDBOX_STATES = ("proven", "unavailable", "off")
SANDBOX_REASON_CHARS = 300


def sandbox_reported(heartbeat: object) -> dict[str, str | None] | None:
    """The heartbeat's ``sandbox`` object, checked and bounded (the heartbeat is
    lenient: anything else there is ignored)."""
    found = heartbeat.get("sandbox") if isinstance(heartbeat, dict) else None
    if not isinstance(found, dict) or found.get("state") not in SANDBOX_STATES:
        return None
    reason = found.get("reason")
    return {
        "state": str(found["state"]),
        "reason": reason[:SANDBOX_REASON_CHARS] if isinstance(reason, str) else None,
    }


async def agent_out(s: AsyncSession, row: AgentRow, connected_streams: int) -> AgentOut:
    keys = (
        await s.scalars(
            select(AgentKeyRow)
            .where(AgentKeyRow.agent_id == row.id)
            .order_by(AgentKeyRow.created_at)
        )
    ).all()
    owners = [o.username for o in await agent_owners(s, row)]
    return AgentOut(
        name=row.name,
        owners=owners,
        workspaces=list(row.workspace_roots or []),
        reported_workspaces=list(row.workspaces or []),
        max_mode=tasking.max_mode_out(row),
        taskers=await tasking.taskers(s, row),
        status=row.status,
        platform=row.platform,
        version=row.version,
        mode_enforcement=row.mode_enforcement,
        sandbox=sandbox_reported(row.heartbeat),
        last_seen_at=row.last_seen_at,
        created_at=row.created_at,
        keys=[
            AgentKeyOut(
                key_id=k.id,
                prefix=k.prefix,
                created_at=k.created_at,
                revoked_at=k.revoked_at,
                expires_at=k.expires_at,
            )
            for k in keys
        ],
        connected_streams=connected_streams,
    )


async def live_agent_out(
    s: AsyncSession, row: AgentRow, connected: Callable[[str], int]
) -> AgentOut:
    """agent_out with `connected(key)`: its open event streams."""
    return await agent_out(s, row, connected(principal_key(row.name, False)))


async def list_agents(s: AsyncSession, connected: Callable[[str], int]) -> list[AgentOut]:
    """Every agent, by name, with `connected(key)`: its open event streams."""
    rows = (await s.scalars(select(AgentRow).order_by(AgentRow.name))).all()
    return [await agent_out(s, r, connected(principal_key(r.name, False))) for r in rows]
