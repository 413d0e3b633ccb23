"""An agent's taskers, workspace roots and mode ceilings: for its owners and
admins (docs/access.md, "Who may set an agent to work")."""

from __future__ import annotations

from fastapi import APIRouter

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.schemas import AgentPolicyPatch, NameIn
from mailui4agents.services import agent_accounts, tasking
from mailui4agents.wire.models import AgentOut, Page, TaskerOut

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])


@router.get("/{name}", response_model=AgentOut)
async def show_agent(name: str, who: Human, gw: GatewayDep) -> AgentOut:
    async with gw.read() as s:
        row = await tasking.managed_agent(s, who, name)
        return await agent_accounts.live_agent_out(s, row, gw.hub.connected)


@router.patch("/{name}", response_model=AgentOut)
async def update_agent(name: str, body: AgentPolicyPatch, who: Human, gw: GatewayDep) -> AgentOut:
    """Set the agent's workspace roots and the highest mode each kind of person may start."""
    async with gw.write() as s:
        row = await tasking.managed_agent(s, who, name)
        ceilings = body.max_mode
        tasking.set_policy(
            row,
            workspaces=body.workspaces,
            max_mode_owners=ceilings.owners if ceilings else None,
            max_mode_taskers=ceilings.taskers if ceilings else None,
        )
        await s.flush()
        return await agent_accounts.live_agent_out(s, row, gw.hub.connected)


@router.get("/{name}/taskers", response_model=Page[TaskerOut])
async def list_taskers(name: str, who: Human, gw: GatewayDep) -> Page[TaskerOut]:
    """The people who may set the agent to work: its owners, then the taskers they added."""
    async with gw.read() as s:
        row = await tasking.managed_agent(s, who, name)
        return page(await tasking.taskers(s, row), None)


@router.post("/{name}/taskers", status_code=201, response_model=Page[TaskerOut])
async def add_tasker(name: str, body: NameIn, who: Human, gw: GatewayDep) -> Page[TaskerOut]:
    async with gw.write() as s:
        row = await tasking.managed_agent(s, who, name)
        await tasking.add_tasker(s, row, body.name, who.name)
        return page(await tasking.taskers(s, row), None)


@router.delete("/{name}/taskers/{username}", response_model=Page[TaskerOut])
async def remove_tasker(name: str, username: str, who: Human, gw: GatewayDep) -> Page[TaskerOut]:
    async with gw.write() as s:
        row = await tasking.managed_agent(s, who, name)
        await tasking.remove_tasker(s, row, username)
        return page(await tasking.taskers(s, row), None)
