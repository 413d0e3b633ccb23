"""Human mail routes."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import json_object, json_page
from mailui4agents.api.results import DUPLICATE, answer
from mailui4agents.api.schemas import Limit, MailCreate
from mailui4agents.api.validation import BodyLimit
from mailui4agents.services import access, reading, sending
from mailui4agents.wire.models import Duplicate, InboxItem, MailOut, Page

router = APIRouter(prefix="/api/v1", tags=["mail"])


@router.post(
    "/mail",
    status_code=201,
    response_model=MailOut | Duplicate,
    response_model_exclude_unset=True,
    responses=DUPLICATE,
)
async def send_mail(
    body: MailCreate, who: Human, gw: GatewayDep, response: Response
) -> Response | Duplicate:
    draft = sending.Draft(
        to=body.to,
        cc=body.cc,
        subject=body.subject,
        body=body.body,
        parent_mail_id=str(body.parent_mail_id) if body.parent_mail_id else None,
        permission_mode=body.permission_mode,
        worktree=bool(body.worktree),
        attachment_ids=[str(i) for i in body.attachment_ids],
    )
    result = (await sending.send(gw, who, draft)).outcome
    return answer(result, response)


@router.get("/mailbox", response_model=Page[InboxItem], response_model_exclude_unset=True)
async def mailbox(
    who: Human,
    gw: GatewayDep,
    status: Literal["unread", "all"] = "all",
    session_id: str | None = None,
    q: str | None = None,
    limit: Limit = 50,
    cursor: str | None = None,
    body_limit: BodyLimit = None,
) -> Response:
    """Bodies are previews (`inbox_preview_chars`) unless `body_limit` says how
    much to keep (0 = whole bodies)."""
    async with gw.write() as s:
        items, nxt = await reading.inbox(
            s,
            who,
            status=status,
            session_id=session_id,
            limit=limit,
            cursor=cursor,
            newest_first=True,
            mark=False,
            q=q,
            body_limit=gw.settings.inbox_preview_chars if body_limit is None else body_limit,
        )
    return json_page(items, nxt)


@router.get("/mail/{mail_id}", response_model=MailOut, response_model_exclude_unset=True)
async def read_mail(mail_id: str, who: Human, gw: GatewayDep) -> Response:
    async with gw.write() as s:
        item = await reading.read_mail(s, access.Reader(who), mail_id, body_limit=None)
    return json_object(item)


@router.get(
    "/mail/{mail_id}/thread", response_model=Page[MailOut], response_model_exclude_unset=True
)
async def thread(
    mail_id: str, who: Human, gw: GatewayDep, limit: Limit = 50, cursor: str | None = None
) -> Response:
    async with gw.write() as s:
        items, nxt = await reading.thread(
            s, access.Reader(who), mail_id, limit=limit, cursor=cursor
        )
    return json_page(items, nxt)
