"""Approvals and questions: agents ask, humans decide, grants remember."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Response

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.api.long_poll import until_settled
from mailui4agents.api.pages import json_model, page
from mailui4agents.api.results import DUPLICATE, answer_request
from mailui4agents.api.schemas import DecisionIn, Limit, PermissionCreate, WithdrawIn
from mailui4agents.domain.results import Refused
from mailui4agents.services import (
    deciding,
    grants,
    permission_decisions,
    permission_requests,
    permissions,
    push_actions,
    size_limits,
)
from mailui4agents.wire.deliveries import DeliveryOut
from mailui4agents.wire.models import Duplicate, GrantOut, Page, PermissionOut, Withdrawn

router = APIRouter(prefix="/api/v1", tags=["permissions"])


@router.post(
    "/agent/permissions",
    status_code=201,
    response_model=PermissionOut | Duplicate,
    response_model_exclude_unset=True,
    responses=DUPLICATE,
)
async def create_permission(
    body: PermissionCreate, who: Agent, gw: GatewayDep, response: Response
) -> Response | Duplicate:
    options = [o.model_dump() for o in body.options] if body.options is not None else None
    size_limits.check_permission(
        gw.settings,
        tool_input=body.tool_input,
        summary=body.summary,
        question=body.question,
        options=options,
    )
    async with gw.write(inline=True) as s:
        result = await permission_requests.create_request(
            s,
            who,
            session_id=str(body.session_id),
            kind=body.kind,
            relay_key=body.relay_key,
            tool_name=body.tool_name,
            tool_input=body.tool_input,
            summary=body.summary,
            question=body.question,
            options=options,
            multi_select=body.multi_select,
            timeout_s=body.timeout_s,
            rules_file_sha256=body.rules_file_sha256,
            sandbox=body.sandbox,
        )
    if isinstance(result, Refused):  # recorded in the audit trail, committed: now the 409
        raise result.error
    return answer_request(result, response)


@router.post("/agent/permissions/withdraw", response_model=Withdrawn)
async def withdraw_permissions(body: WithdrawIn, who: Agent, gw: GatewayDep) -> Withdrawn:
    """The agent's terminal answered first (docs/remote.md, "Answered in the
    terminal"): its pending requests under `relay_key_prefix` close as
    "answered in the terminal", and every page and device shows it. A request a
    human decided first keeps that decision (not listed)."""
    async with gw.write() as s:
        ids = await permissions.withdraw_answered(s, who, body.relay_key_prefix)
    return Withdrawn(withdrawn=ids)


@router.get(
    "/agent/permissions/{request_id}",
    response_model=PermissionOut,
    response_model_exclude_unset=True,
)
async def get_permission(
    request_id: str,
    who: Agent,
    gw: GatewayDep,
    wait: Annotated[float, Query(ge=0, le=60)] = 0,
) -> PermissionOut:
    """Long-poll: answers as soon as the request is no longer pending, or after
    `wait` seconds with it still pending."""

    async def load() -> PermissionOut:
        async with gw.read() as s:
            return permissions.permission_out(await permissions.own_request(s, who, request_id))

    return await until_settled(gw, who.key, load, wait)


@router.get("/permissions", response_model=Page[PermissionOut], response_model_exclude_unset=True)
async def list_permissions(
    who: Human,
    gw: GatewayDep,
    status: Literal["pending", "decided"] | None = None,
    session_id: str | None = None,
    limit: Limit = 50,
) -> Page[PermissionOut]:
    async with gw.write() as s:
        items = await deciding.requests_for(s, who, status, session_id, limit)
    return page(items, None)


@router.post(
    "/permissions/{request_id}/decision",
    response_model=PermissionOut,
    response_model_exclude_unset=True,
)
async def decide_permission(
    request_id: str,
    body: DecisionIn,
    who: Human,
    gw: GatewayDep,
    x_agentmail_channel: Annotated[str | None, Header(max_length=20)] = None,
) -> Response:
    """Decide once; a later decision gets 409 `already_decided` saying who decided,
    from where, when. `X-Agentmail-Channel: cli` (sent by `agentmail approve`,
    `deny`, `answer`) records the decision as the command line's; anything else
    is the API's (docs/remote.md, "First answer wins")."""
    channel = "cli" if x_agentmail_channel == "cli" else "api"
    choice = permission_decisions.Choice(
        body.decision, body.note, body.always, body.grant_pattern, body.answers, channel
    )
    return json_model(await deciding.decide(gw, who, request_id, choice))


@router.get("/permissions/{request_id}/deliveries", response_model=list[DeliveryOut])
async def permission_deliveries(request_id: str, who: Human, gw: GatewayDep) -> list[DeliveryOut]:
    """What happened to the request on each channel and device, in order (the
    session's deciders only: docs/remote.md, "Tracking a request")."""
    async with gw.read() as s:
        return await push_actions.deliveries(s, who, request_id)


@router.get("/grants", response_model=Page[GrantOut], response_model_exclude_unset=True)
async def list_grants(
    who: Human, gw: GatewayDep, session_id: str | None = None, include_revoked: bool = False
) -> Page[GrantOut]:
    async with gw.read() as s:
        return page(
            await grants.list_grants(s, who, session_id, include_revoked=include_revoked), None
        )


@router.delete("/grants/{grant_id}", response_model=GrantOut, response_model_exclude_unset=True)
async def revoke_grant(grant_id: str, who: Human, gw: GatewayDep) -> GrantOut:
    async with gw.write() as s:
        return await grants.revoke_grant(s, who, grant_id)
