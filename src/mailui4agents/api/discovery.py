"""Participants, contacts, address suggestions, search and forwarding.

Agent routes take `session_id`: the session the agent works in. Its workspace
bounds what the agent may read (docs/access.md); the gateway derives it, the caller
never names a workspace.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.api.pages import json_page, page
from mailui4agents.api.results import DUPLICATE, answer
from mailui4agents.api.schemas import ForwardIn, Limit
from mailui4agents.domain.errors import invalid_value
from mailui4agents.services import access, discovery, search
from mailui4agents.wire.models import (
    ContactOut,
    Duplicate,
    MailOut,
    Page,
    ParticipantOut,
    SearchHit,
    Suggestions,
)

agent_router = APIRouter(prefix="/api/v1/agent", tags=["agent"])
human_router = APIRouter(prefix="/api/v1", tags=["mail"])

ScopeId = Annotated[
    str | None,
    Query(description="The session the agent works in; reads stay in its workspace."),
]
SearchText = Annotated[
    str, Query(description="Words to find in subject and body; `word*` = prefix.")
]
Partial = Annotated[str, Query(description="A partial address: name, name@path or name@path.alias")]


# -- agents -----------------------------------------------------------------------------


@agent_router.post(
    "/mail/{mail_id}/forward",
    status_code=201,
    response_model=MailOut | Duplicate,
    response_model_exclude_unset=True,
    responses=DUPLICATE,
)
async def agent_forward(
    mail_id: str, body: ForwardIn, who: Agent, gw: GatewayDep, response: Response
) -> Response | Duplicate:
    async with gw.write() as s:
        reader = await access.reader(s, who, str(body.session_id) if body.session_id else None)
        result = await discovery.forward(
            s, gw.settings, reader, mail_id, to=body.to, cc=body.cc, note=body.note
        )
    return answer(result, response)


@agent_router.get(
    "/sessions/{id}/participants",
    response_model=Page[ParticipantOut],
    response_model_exclude_unset=True,
)
async def agent_participants(
    target: Annotated[str, Path(alias="id")],
    who: Agent,
    gw: GatewayDep,
    session_id: ScopeId = None,
) -> Page[ParticipantOut]:
    async with gw.read() as s:
        reader = await access.reader(s, who, session_id)
        items = await discovery.participants(s, reader, target)
    return page(items, None)


@agent_router.get("/contacts", response_model=Page[ContactOut], response_model_exclude_unset=True)
async def agent_contacts(
    who: Agent, gw: GatewayDep, session_id: ScopeId = None
) -> Page[ContactOut]:
    async with gw.read() as s:
        reader = await access.reader(s, who, session_id)
        return page(await discovery.contacts(s, reader), None)


@agent_router.get(
    "/contacts/suggest", response_model=Suggestions, response_model_exclude_unset=True
)
async def agent_suggest(
    who: Agent, gw: GatewayDep, q: Partial = "", session_id: ScopeId = None
) -> Suggestions:
    async with gw.read() as s:
        return await discovery.suggest(s, await access.reader(s, who, session_id), q)


@agent_router.get("/search", response_model=Page[SearchHit], response_model_exclude_unset=True)
async def agent_search(
    who: Agent,
    gw: GatewayDep,
    q: SearchText,
    session_id: ScopeId = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> Response:
    async with gw.write() as s:  # a write: every read is recorded
        reader = await access.reader(s, who, session_id)
        items, nxt = await search.search(s, reader, q, limit, cursor)
    return json_page(items, nxt)


# -- humans -----------------------------------------------------------------------------


@human_router.post(
    "/mail/{mail_id}/forward",
    status_code=201,
    response_model=MailOut | Duplicate,
    response_model_exclude_unset=True,
    responses=DUPLICATE,
)
async def human_forward(
    mail_id: str, body: ForwardIn, who: Human, gw: GatewayDep, response: Response
) -> Response | Duplicate:
    if body.session_id is not None:
        # Refuse rather than ignore: people are not workspace-bound.
        raise invalid_value("session_id", "session_id is the read scope of agents; leave it out")
    async with gw.write() as s:
        result = await discovery.forward(
            s, gw.settings, access.Reader(who), mail_id, to=body.to, cc=body.cc, note=body.note
        )
    return answer(result, response)


@human_router.get("/contacts", response_model=Page[ContactOut], response_model_exclude_unset=True)
async def human_contacts(who: Human, gw: GatewayDep) -> Page[ContactOut]:
    async with gw.read() as s:
        return page(await discovery.contacts(s, access.Reader(who)), None)


@human_router.get(
    "/contacts/suggest", response_model=Suggestions, response_model_exclude_unset=True
)
async def human_suggest(who: Human, gw: GatewayDep, q: Partial = "") -> Suggestions:
    async with gw.read() as s:
        return await discovery.suggest(s, access.Reader(who), q)


@human_router.get("/search", response_model=Page[SearchHit], response_model_exclude_unset=True)
async def human_search(
    who: Human,
    gw: GatewayDep,
    q: SearchText,
    limit: Limit = 50,
    cursor: str | None = None,
) -> Response:
    """Mail of the sessions you take part in (admins: all sessions), newest first."""
    async with gw.write() as s:
        items, nxt = await search.search(s, access.Reader(who), q, limit, cursor)
    return json_page(items, nxt)


router = APIRouter()
router.include_router(agent_router)
router.include_router(human_router)
