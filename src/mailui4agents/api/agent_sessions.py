"""Agent views of sessions: the mode a hook must apply, and binding an interactive
terminal session to a mail session its owner can approve from."""

from __future__ import annotations

from fastapi import APIRouter

from mailui4agents.api.deps import Agent, GatewayDep
from mailui4agents.api.schemas import AliasProposal, InteractiveSessionIn, WaitingIn
from mailui4agents.services import access, agents, identity, session_summary, sessions, waiting
from mailui4agents.wire.models import SessionOut, WaitingOut

router = APIRouter(prefix="/api/v1/agent/sessions", tags=["agent"])


@router.get("/{session_id}", response_model=SessionOut, response_model_exclude_unset=True)
async def get_session(session_id: str, who: Agent, gw: GatewayDep) -> SessionOut:
    async with gw.read() as s:
        # The session itself is the scope: an agent may look up (for its mode) any
        # session it takes part in.
        reader = await access.reader(s, who, session_id)
        return await session_summary.describe(
            s, await session_summary.get_session(s, session_id), reader.name
        )


@router.post("/interactive", response_model=SessionOut, response_model_exclude_unset=True)
async def interactive_session(body: InteractiveSessionIn, who: Agent, gw: GatewayDep) -> SessionOut:
    async with gw.write() as s:
        row = await agents.interactive_session(
            s,
            gw.settings,
            who,
            platform_id=body.platform_id,
            owner=body.owner,
            cwd=identity.normalised_workspace(body.cwd, "cwd"),
            title=body.title,
        )
        return await session_summary.describe(s, row, who.name)


@router.post(
    "/{session_id}/alias-proposal", response_model=SessionOut, response_model_exclude_unset=True
)
async def propose_alias(
    session_id: str, body: AliasProposal, who: Agent, gw: GatewayDep
) -> SessionOut:
    """Suggest a name for a session the agent takes part in; a decider accepts it."""
    async with gw.write() as s:
        return await sessions.propose_alias(s, who, session_id, body.alias)


@router.post("/{session_id}/waiting", response_model=WaitingOut)
async def waiting_notice(
    session_id: str, body: WaitingIn, who: Agent, gw: GatewayDep
) -> WaitingOut:
    """The agent waits for its person: push the session's deciders, once per turn."""
    async with gw.write() as s:
        done = await waiting.notify(
            s, who, session_id, kind=body.kind, excerpt=body.excerpt, turn=body.turn
        )
    return WaitingOut(deduplicated=done.deduplicated, pushed=done.pushed)
