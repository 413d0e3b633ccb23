"""Reviewing an agent's work (docs/api.md, "Work and review"; docs/review.md):
people read a session's worktree, comment on a `work` mail's lines, send the
review, and its owners merge, discard or keep it; admins see every worktree;
the agent's bridge reports its worktrees, answers the actions and asks before
it would remove work past its retention."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from pydantic import Field

from mailui4agents.api.deps import Admin, Agent, GatewayDep, Human
from mailui4agents.api.long_poll import until_settled
from mailui4agents.api.pages import page
from mailui4agents.api.validation import StrictBody
from mailui4agents.services import review, work
from mailui4agents.wire.models import Page
from mailui4agents.wire.work import (
    ReviewCommentOut,
    ReviewSent,
    SessionWorkOut,
    WorkActionOut,
    WorkAskOut,
    WorkOut,
    WorktreesOut,
)

router = APIRouter(prefix="/api/v1", tags=["work"])

HEX40 = "^[0-9a-f]{40}$"
MAX_BYTES = 2**53  # a disk use JSON numbers carry exactly everywhere
MAX_WAIT = 30
# A git remote name: no option, no whitespace or control character.
REMOTE = r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$"
ActionStatus = Literal["pending", "done", "refused", "failed"]


class CommentCreate(StrictBody):
    path: str = Field(min_length=1, max_length=review.MAX_PATH)
    line: int = Field(ge=1, le=2**31 - 1)
    end_line: int | None = Field(default=None, ge=1, le=2**31 - 1)
    side: Literal["new", "old"] = "new"
    body: str = Field(min_length=1, max_length=review.MAX_BODY)


class ReviewCreate(StrictBody):
    """No fields: the review is every pending comment of the caller."""


class ActionCreate(StrictBody):
    action: Literal["merge", "discard", "keep", "push"]


class WorkReport(StrictBody):
    """What the bridge knows of a session's worktree (docs/review.md)."""

    branch: str = Field(min_length=len("agentmail/") + 1, max_length=255, pattern="^agentmail/")
    path: str = Field(min_length=2, max_length=4096, pattern="^/")
    base_branch: str | None = Field(default=None, min_length=1, max_length=255)
    base_commit: str = Field(pattern=HEX40)
    head_commit: str = Field(pattern=HEX40)
    bytes: int = Field(ge=0, le=MAX_BYTES)
    state: Literal["active", "removed"]
    dirty: bool
    unmerged: int = Field(ge=0, le=2**31 - 1)
    #: The remote the branch can be pushed to ("Open PR"); None: the repository has none.
    remote: str | None = Field(default=None, min_length=1, max_length=255, pattern=REMOTE)


class ActionAnswer(StrictBody):
    status: Literal["done", "refused", "failed"]
    message: str = Field(max_length=work.MAX_MESSAGE)
    conflicts: list[Annotated[str, Field(min_length=1, max_length=review.MAX_PATH)]] = Field(
        default=[], max_length=work.MAX_CONFLICTS
    )


class AskIn(StrictBody):
    reason: str = Field(min_length=1, max_length=work.MAX_REASON)


# -- people -----------------------------------------------------------------------------


@router.get("/sessions/{session_id}/work", response_model=WorkOut)
async def session_work(session_id: str, who: Human, gw: GatewayDep) -> WorkOut:
    """The session's worktree, its last 20 actions, and the review comments."""
    async with gw.read() as s:
        return await work.view(s, who, session_id)


@router.post("/mails/{mail_id}/comments", status_code=201, response_model=ReviewCommentOut)
async def add_comment(
    mail_id: str, body: CommentCreate, who: Human, gw: GatewayDep
) -> ReviewCommentOut:
    """A comment on lines of a `work` mail's patch (they must be in it)."""
    c = review.CommentIn(body.path, body.line, body.body, body.end_line, body.side)
    return await review.add_comment(gw, who, mail_id, c)


@router.delete("/comments/{comment_id}", status_code=204)
async def delete_comment(comment_id: str, who: Human, gw: GatewayDep) -> Response:
    """Its author takes back a comment not sent yet."""
    async with gw.write() as s:
        await review.delete_comment(s, who, comment_id)
    return Response(status_code=204)


@router.post("/sessions/{session_id}/review", status_code=201, response_model=ReviewSent)
async def send_review(
    session_id: str, who: Human, gw: GatewayDep, body: ReviewCreate | None = None
) -> ReviewSent:
    """Every pending comment of the caller, as one mail to the agent (the body,
    `{}`, may be left out)."""
    return await review.send_review(gw, who, session_id)


@router.post("/sessions/{session_id}/work/actions", status_code=201, response_model=WorkActionOut)
async def request_action(
    session_id: str, body: ActionCreate, who: Human, gw: GatewayDep
) -> WorkActionOut:
    """Merge, discard, keep or push the session's worktree: its owners and admins."""
    return await work.request_action(gw, who, session_id, body.action)


@router.get("/work/actions/{action_id}", response_model=WorkActionOut)
async def get_action(
    action_id: str,
    who: Human,
    gw: GatewayDep,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 0,
) -> WorkActionOut:
    """Long-poll: answers as soon as the action is no longer pending, or after
    `wait` seconds with it still pending (the bridge's answer wakes the person
    who asked; anyone else who may read it gets the state at the end)."""

    async def load() -> WorkActionOut:
        async with gw.read() as s:
            return await work.get_action(s, who, action_id)

    return await until_settled(gw, who.key, load, wait)


@router.get("/admin/worktrees", response_model=WorktreesOut)
async def admin_worktrees(who: Admin, gw: GatewayDep) -> WorktreesOut:
    """Every active worktree and their disk use (admins)."""
    async with gw.read() as s:
        return await work.worktrees(s)


# -- agents -----------------------------------------------------------------------------


@router.put("/agent/sessions/{session_id}/work", response_model=SessionWorkOut)
async def report_work(
    session_id: str, body: WorkReport, who: Agent, gw: GatewayDep
) -> SessionWorkOut:
    """The bridge reports the worktree of a session it runs in."""
    async with gw.write() as s:
        return await work.report(s, who, session_id, body.model_dump())


@router.get("/agent/work/actions", response_model=Page[WorkActionOut])
async def agent_actions(
    who: Agent, gw: GatewayDep, status: ActionStatus | None = None
) -> Page[WorkActionOut]:
    """The agent's actions (its own sessions), oldest first; `status=pending` at start."""
    async with gw.read() as s:
        return page(await work.agent_actions(s, who, status), None)


@router.post("/agent/work/actions/{action_id}", response_model=WorkActionOut)
async def finish_action(
    action_id: str, body: ActionAnswer, who: Agent, gw: GatewayDep
) -> WorkActionOut:
    """The bridge's answer to one of its pending actions."""
    return await work.finish_action(
        gw, who, action_id, body.status, body.message, list(body.conflicts)
    )


@router.post(
    "/agent/sessions/{session_id}/work/ask",
    status_code=201,
    response_model=WorkAskOut,
    responses={200: {"model": WorkAskOut, "description": "asked before, still unanswered"}},
)
async def ask(
    session_id: str, body: AskIn, who: Agent, gw: GatewayDep, response: Response
) -> WorkAskOut:
    """Ask the session's owners to keep or discard a worktree past its retention
    that holds work (once per unanswered question: then 200, no new mail)."""
    out, created = await work.ask(gw, who, session_id, body.reason)
    if not created:
        response.status_code = 200
    return out
