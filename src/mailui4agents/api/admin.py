"""Admin: users (who is an admin, password resets), agents and agent keys, and
the workspace aliases of new work by e-mail (docs/email.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from mailui4agents.api.deps import Admin, GatewayDep, bearer_token
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import AgentCreate, NameIn, PasswordIn, UserCreate, UserPatch
from mailui4agents.api.validation import StrictBody
from mailui4agents.domain.workspaces import MAX_WORKSPACE_BYTES
from mailui4agents.services import agent_accounts, identity, logins, tasking, workspace_aliases
from mailui4agents.wire.email import WorkspaceAliasOut, WorkspaceAliasRemoved
from mailui4agents.wire.models import (
    AgentCreated,
    AgentOut,
    KeyRotated,
    OwnerOut,
    Page,
    Revoked,
    UserCreated,
    UserOut,
)

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])

MAX_KEY_GRACE_S = 30 * 86400  # a rotation's grace period is at most 30 days


@router.post("/users", status_code=201, response_model=UserCreated)
async def create_user(body: UserCreate, _: Admin, gw: GatewayDep) -> UserCreated:
    async with gw.write() as s:
        row = await identity.create_user(s, gw.hasher, body.username, body.password, body.is_admin)
        similar = await identity.look_alikes(s, row.username)
    user = identity.user_out(row)
    return UserCreated(
        username=user.username,
        is_admin=user.is_admin,
        created_at=user.created_at,
        warnings=identity.name_warnings(similar),
    )


@router.get("/users", response_model=Page[UserOut])
async def list_users(_: Admin, gw: GatewayDep) -> Page[UserOut]:
    async with gw.read() as s:
        return page(await identity.list_users(s), None)


@router.patch("/users/{username}", response_model=UserOut)
async def update_user(username: str, body: UserPatch, _: Admin, gw: GatewayDep) -> UserOut:
    """Make `username` an admin or take it back; it holds at the user's next
    request (its open streams re-check). 404 unknown user; 409 for the last admin."""
    return await logins.set_admin(gw, username, body.is_admin)


@router.put("/users/{username}/password", response_model=UserOut)
async def reset_password(
    username: str, body: PasswordIn, request: Request, who: Admin, gw: GatewayDep
) -> UserOut:
    """Set a new password; every login and API token of the user ends (the
    caller's own, when an admin resets itself, stays). 400 `password`; 404 `username`."""
    return await logins.reset_password(gw, who, bearer_token(request), username, body.password)


@router.post("/agents", status_code=201, response_model=AgentCreated)
async def create_agent(body: AgentCreate, who: Admin, gw: GatewayDep) -> AgentCreated:
    async with gw.write() as s:
        row, key = await agent_accounts.create_agent(
            s,
            body.name,
            body.workspaces,
            creator=who.name,
            owners=body.owners,
            taskers=body.taskers,
        )
        if body.max_mode is not None:
            tasking.set_policy(
                row,
                workspaces=None,
                max_mode_owners=body.max_mode.owners,
                max_mode_taskers=body.max_mode.taskers,
            )
        owners = [o.username for o in await agent_accounts.agent_owners(s, row)]
        similar = await identity.look_alikes(s, row.name)
    return AgentCreated(
        name=row.name,
        key=key,
        owners=owners,
        created_at=row.created_at,
        warnings=identity.name_warnings(similar),
    )


@router.get("/agents/{name}/owners", response_model=Page[OwnerOut])
async def list_agent_owners(name: str, _: Admin, gw: GatewayDep) -> Page[OwnerOut]:
    """The humans who see and adopt this agent's platform sessions."""
    async with gw.read() as s:
        rows = await agent_accounts.agent_owners(s, await agent_accounts.get_agent(s, name))
    return page([agent_accounts.owner_out(r) for r in rows], None)


@router.post("/agents/{name}/owners", status_code=201, response_model=Page[OwnerOut])
async def add_agent_owner(name: str, body: NameIn, who: Admin, gw: GatewayDep) -> Page[OwnerOut]:
    async with gw.write() as s:
        agent = await agent_accounts.get_agent(s, name)
        await agent_accounts.add_agent_owner(s, agent, body.name, who.name)
        rows = await agent_accounts.agent_owners(s, agent)
    return page([agent_accounts.owner_out(r) for r in rows], None)


@router.delete("/agents/{name}/owners/{username}", response_model=Page[OwnerOut])
async def remove_agent_owner(name: str, username: str, _: Admin, gw: GatewayDep) -> Page[OwnerOut]:
    async with gw.write() as s:
        agent = await agent_accounts.get_agent(s, name)
        await agent_accounts.remove_agent_owner(s, agent, username)
        rows = await agent_accounts.agent_owners(s, agent)
    return page([agent_accounts.owner_out(r) for r in rows], None)


@router.get("/agents", response_model=Page[AgentOut])
async def list_agents(_: Admin, gw: GatewayDep) -> Page[AgentOut]:
    async with gw.read() as s:
        return page(await agent_accounts.list_agents(s, gw.hub.connected), None)


@router.post("/agents/{name}/keys", status_code=201, response_model=KeyRotated)
async def rotate_key(
    name: str,
    _: Admin,
    gw: GatewayDep,
    grace_s: Annotated[int, Query(ge=0, le=MAX_KEY_GRACE_S)] = 0,
) -> KeyRotated:
    """A new key, shown once. The agent's other keys stop working at once, or
    after `grace_s` seconds (time to deploy the new key); their open streams end
    then too."""
    async with gw.write() as s:
        key = await agent_accounts.rotate_key(s, name, grace_s)
    return KeyRotated(name=name, key=key, grace_s=grace_s)


@router.delete("/agents/{name}/keys/{key_id}", response_model=Revoked)
async def revoke_key(name: str, key_id: str, _: Admin, gw: GatewayDep) -> Revoked:
    async with gw.write() as s:
        await agent_accounts.revoke_agent_key(s, name, key_id)
    return Revoked(revoked=key_id)


class WorkspaceAliasIn(StrictBody):
    """The workspace an alias names: an absolute path (normalised)."""

    workspace: str = Field(min_length=1, max_length=MAX_WORKSPACE_BYTES)


@router.get("/workspace-aliases", response_model=Page[WorkspaceAliasOut])
async def list_workspace_aliases(who: Admin, gw: GatewayDep) -> Page[WorkspaceAliasOut]:
    """Every workspace alias, by name."""
    async with gw.read() as s:
        return page(await workspace_aliases.list_aliases(s, who), None)


@router.put(
    "/workspace-aliases/{alias}",
    status_code=201,
    response_model=WorkspaceAliasOut,
    responses={200: {"model": WorkspaceAliasOut, "description": "an existing alias changed"}},
)
async def put_workspace_alias(
    alias: str, body: WorkspaceAliasIn, who: Admin, gw: GatewayDep, response: Response
) -> WorkspaceAliasOut:
    """Name `workspace` `alias` for new work by e-mail (`claude+alias@domain`):
    201 a new alias, 200 an existing one now names this workspace."""
    async with gw.write() as s:
        out, created = await workspace_aliases.put_alias(s, who, alias, body.workspace)
    if not created:
        response.status_code = 200
    return out


@router.delete("/workspace-aliases/{alias}", response_model=WorkspaceAliasRemoved)
async def remove_workspace_alias(alias: str, who: Admin, gw: GatewayDep) -> WorkspaceAliasRemoved:
    """Remove an alias; sessions started through it keep their workspace. 404 unknown."""
    async with gw.write() as s:
        await workspace_aliases.remove_alias(s, who, alias)
    return WorkspaceAliasRemoved(removed=alias)
