"""Agent routes: heartbeat, mail, inbox. Agents never reach human routes."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, Request, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from mailui4agents.api.deps import Agent, GatewayDep
from mailui4agents.api.pages import json_object, json_page
from mailui4agents.api.results import DUPLICATE, answer
from mailui4agents.api.schemas import AgentMailCreate, Limit, MarkRead
from mailui4agents.api.validation import BodyLimit, error_from_validation
from mailui4agents.domain.mail_types import MailType
from mailui4agents.services import (
    access,
    agents,
    identity,
    platform_sessions,
    reading,
    sending,
    size_limits,
)
from mailui4agents.wire.models import (
    Duplicate,
    HeartbeatOut,
    InboxItem,
    JsonObject,
    MailOut,
    Marked,
    Page,
)

router = APIRouter(prefix="/api/v1/agent", tags=["agent"])


class HeartbeatIn(BaseModel):
    """Lenient on purpose: newer clients must work with older gateways, so unknown
    fields are accepted and echoed back, never rejected. Known fields keep types."""

    model_config = ConfigDict(extra="ignore", strict=True)
    status: str | None = None
    platform: str | None = None
    version: str | None = None
    mode_enforcement: Any = None  # any value: unknown → advisory, never an error
    workspaces: list[str] | None = None
    platform_sessions: list[JsonObject] | None = None
    pending: Any = None
    sandbox: Any = None  # the bridge's {state, reason} (docs/sandbox.md): read back checked


@router.post("/heartbeat", response_model=HeartbeatOut, response_model_exclude_unset=True)
async def heartbeat(
    request: Request, who: Agent, gw: GatewayDep, body: JsonObject = Body(...)
) -> HeartbeatOut:
    size_limits.check_heartbeat(gw.settings, body)
    try:
        hb = HeartbeatIn.model_validate(body)
        reported = (
            platform_sessions.as_dicts(hb.platform_sessions)
            if hb.platform_sessions is not None
            else None
        )
    except ValidationError as e:
        from fastapi.exceptions import RequestValidationError

        errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
        raise error_from_validation(request, RequestValidationError(errors), HeartbeatIn) from None
    unknown = sorted(set(body) - set(HeartbeatIn.model_fields))
    report = agents.Heartbeat(
        raw=body,
        status=hb.status,
        platform=hb.platform,
        version=hb.version,
        mode_enforcement=hb.mode_enforcement,
        mode_reported="mode_enforcement" in body,
        workspaces=None if hb.workspaces is None else identity.normalised_workspaces(hb.workspaces),
        platform_sessions=reported,
    )
    async with gw.write() as s:
        level = await agents.heartbeat(s, who, report)
    return HeartbeatOut(ok=True, unknown_fields=unknown, mode_enforcement=level)


@router.post(
    "/mail",
    status_code=201,
    response_model=MailOut | Duplicate,
    response_model_exclude_unset=True,
    responses=DUPLICATE,
)
async def send_mail(
    body: AgentMailCreate, who: Agent, gw: GatewayDep, response: Response
) -> Response | Duplicate:
    draft = sending.Draft(
        to=body.to,
        cc=body.cc,
        subject=body.subject,
        body=body.body,
        parent_mail_id=str(body.parent_mail_id) if body.parent_mail_id else None,
        relay=body.relay,
        relay_key=body.relay_key,
        from_session_id=str(body.from_session_id) if body.from_session_id else None,
        type_=(
            MailType.FAILURE
            if body.type == "failure"
            else MailType.WORK
            if body.type == "work"
            else MailType.RELAY
            if body.relay
            else MailType.MESSAGE
        ),
        attachment_ids=[str(i) for i in body.attachment_ids],
    )
    result = (await sending.send(gw, who, draft)).outcome
    return answer(result, response)


@router.get("/inbox", response_model=Page[InboxItem], response_model_exclude_unset=True)
async def inbox(
    who: Agent,
    gw: GatewayDep,
    status: Literal["unread", "all"] = "unread",
    session_id: str | None = None,
    mark_read: bool = False,
    limit: Limit = 50,
    cursor: str | None = None,
    body_limit: BodyLimit = None,
) -> Response:
    """Bodies are previews (`inbox_preview_chars`, `body_truncated: true`) unless
    `body_limit` says how much to keep (0 = whole bodies); read one mail for all of it."""
    async with gw.write() as s:
        items, nxt = await reading.inbox(
            s,
            who,
            status=status,
            session_id=session_id,
            limit=limit,
            cursor=cursor,
            newest_first=False,
            mark=mark_read,
            body_limit=gw.settings.inbox_preview_chars if body_limit is None else body_limit,
        )
    return json_page(items, nxt)


@router.post("/inbox/read", response_model=Marked)
async def mark_read(body: MarkRead, who: Agent, gw: GatewayDep) -> Marked:
    async with gw.write() as s:
        n = await reading.mark_read_request(
            s,
            who,
            str(body.session_id) if body.session_id else None,
            [str(i) for i in body.mail_ids] if body.mail_ids is not None else None,
        )
    return Marked(marked=n)


@router.get("/mail/{mail_id}", response_model=MailOut, response_model_exclude_unset=True)
async def read_mail(
    mail_id: str,
    who: Agent,
    gw: GatewayDep,
    session_id: str | None = None,
    body_limit: BodyLimit = None,
) -> Response:
    async with gw.write() as s:
        reader = await access.reader(s, who, session_id)
        item = await reading.read_mail(s, reader, mail_id, body_limit=body_limit)
    return json_object(item)


@router.get(
    "/mail/{mail_id}/thread", response_model=Page[MailOut], response_model_exclude_unset=True
)
async def thread(
    mail_id: str,
    who: Agent,
    gw: GatewayDep,
    session_id: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
) -> Response:
    async with gw.write() as s:
        reader = await access.reader(s, who, session_id)
        items, nxt = await reading.thread(s, reader, mail_id, limit=limit, cursor=cursor)
    return json_page(items, nxt)
