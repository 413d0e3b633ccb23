"""A session's worktree and what its owners do with it (docs/review.md): the
bridge reports the worktree (`report`), an owner asks to merge, discard or keep it
(`request_action`: a `work_action` event to the agent), the bridge answers
(`finish_action`; a merge refused on conflicts goes back to the agent as a mail),
and asks the owners before it would remove work past its retention (`ask`).

Comments on a turn's patch and the review mail are services/review.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, SessionRow, UserRow
from mailui4agents.db.types import utcnow
from mailui4agents.db.work_tables import ReviewCommentRow, SessionWorkRow, WorkActionRow
from mailui4agents.domain.errors import Conflict, DomainError, not_found
from mailui4agents.domain.mail_types import MailType, Recipient
from mailui4agents.domain.results import Sent
from mailui4agents.events import log
from mailui4agents.services import access, delivery, sending
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.services.wire_shapes import session_address
from mailui4agents.state import Gateway
from mailui4agents.wire.events import EventType
from mailui4agents.wire.work import (
    ReviewCommentOut,
    SessionWorkOut,
    WorkActionOut,
    WorkAskOut,
    WorkOut,
    WorktreeItem,
    WorktreesOut,
)

logger = logging.getLogger("mailui4agents.work")

ACTIONS = ("merge", "discard", "keep", "push")
FINISHED = ("done", "refused", "failed")
LAST_ACTIONS = 20  # actions a view lists, newest first
MAX_MESSAGE = 4000  # the bridge's answer to an action (docs/limits.md)
MAX_CONFLICTS = 1000  # paths of a refused merge
MAX_REASON = 1000  # why a worktree past its retention is kept
CONFLICTS_NAMED = 100  # paths the conflict mail names; the rest are counted


def work_out(row: SessionWorkRow) -> SessionWorkOut:
    return SessionWorkOut(
        session_id=row.session_id, agent=row.agent, branch=row.branch, path=row.path,
        base_branch=row.base_branch, base_commit=row.base_commit, head_commit=row.head_commit,
        bytes=row.bytes, state=row.state, dirty=row.dirty, unmerged=row.unmerged,
        remote=row.remote, updated_at=row.updated_at,
    )  # fmt: skip


def action_out(row: WorkActionRow) -> WorkActionOut:
    return WorkActionOut(
        id=row.id, session_id=row.session_id, agent=row.agent, action=row.action,
        requested_by=row.requested_by, status=row.status, message=row.message,
        conflicts=list(row.conflicts or []), created_at=row.created_at,
        finished_at=row.finished_at,
    )  # fmt: skip


def comment_out(row: ReviewCommentRow) -> ReviewCommentOut:
    return ReviewCommentOut(
        id=row.id, session_id=row.session_id, mail_id=row.mail_id, author=row.author,
        path=row.path, side=row.side, line=row.line, end_line=row.end_line, body=row.body,
        code=row.code, created_at=row.created_at, sent_mail_id=row.sent_mail_id,
        sent_at=row.sent_at,
    )  # fmt: skip


async def readable_session(s: AsyncSession, who: Principal, session_id: str) -> SessionRow:
    """The session, if `who` may read its thread (NotFound otherwise, as if absent)."""
    what = f"session '{session_id}'"
    session = await s.get(SessionRow, session_id)
    if session is None:
        raise not_found(what)
    await access.Reader(who).ensure_read(s, session, what)
    return session


async def own_session(s: AsyncSession, agent: Principal, session_id: str) -> SessionRow:
    """A session the agent takes part in (runs in); NotFound for any other."""
    session = await s.get(SessionRow, session_id)
    if session is None or not await access.is_member(s, session_id, agent.name):
        raise not_found(f"session '{session_id}'")
    return session


# -- people ---------------------------------------------------------------------------


async def view(s: AsyncSession, who: Principal, session_id: str) -> WorkOut:
    """The session's worktree, its last actions and the review comments `who` sees:
    their own (sent or not) and the others' sent ones (a draft is its author's)."""
    session = await readable_session(s, who, session_id)
    work = await s.get(SessionWorkRow, session_id)
    actions = await s.scalars(
        select(WorkActionRow)
        .where(WorkActionRow.session_id == session_id)
        .order_by(WorkActionRow.created_at.desc(), WorkActionRow.id.desc())
        .limit(LAST_ACTIONS)
    )
    comments = list(
        await s.scalars(
            select(ReviewCommentRow)
            .where(
                ReviewCommentRow.session_id == session_id,
                (ReviewCommentRow.author == who.name) | ReviewCommentRow.sent_at.is_not(None),
            )
            .order_by(ReviewCommentRow.created_at, ReviewCommentRow.id)
        )
    )
    pending = sum(1 for c in comments if c.author == who.name and c.sent_at is None)
    return WorkOut(
        worktree=bool(session.worktree),
        work=work_out(work) if work is not None else None,
        actions=[action_out(a) for a in actions],
        comments=[comment_out(c) for c in comments],
        pending_comments=pending,
    )


async def request_action(
    gw: Gateway, who: Principal, session_id: str, action: str
) -> WorkActionOut:
    """An owner (or an admin) asks the bridge to merge, discard, keep or push
    the session's worktree: one pending action per session (409
    work_action_pending), only while a worktree is active (409 no_worktree), a
    push only when the bridge reported a remote (409 no_remote); the `work_action` event to
    the agent is written with it."""
    async with gw.write() as s:
        session = await s.get(SessionRow, session_id)
        if session is None:
            raise not_found(f"session '{session_id}'")
        await access.Reader(who).ensure_owner(s, session, f"session '{session_id}'")
        # Concurrent requests (PostgreSQL): the event lock first, so the check
        # below sees every committed action; the partial unique index is the
        # database's own guard behind it.
        await log.take_event_lock(s)
        work = await s.get(SessionWorkRow, session_id)
        if work is None or work.state != "active":
            raise Conflict(
                f"session '{session.alias}' has no active worktree", reason="no_worktree"
            )
        if action == "push" and not work.remote:
            raise Conflict(
                f"the repository of session '{session.alias}' has no git remote to push "
                f"{work.branch} to",
                reason="no_remote",
            )
        pending = await s.scalar(
            select(WorkActionRow.id).where(
                WorkActionRow.session_id == session_id, WorkActionRow.status == "pending"
            )
        )
        if pending is not None:
            raise _pending(pending)
        row = WorkActionRow(
            session_id=session_id,
            agent=work.agent,
            action=action,
            requested_by=who.name,
            status="pending",
            conflicts=[],
            created_at=utcnow(),
        )
        s.add(row)
        try:
            await s.flush()
        except IntegrityError:
            raise _pending(None) from None
        out = action_out(row)
        await log.append(s, [principal_key(work.agent, False)], EventType.WORK_ACTION, out)
    return out


def _pending(action_id: str | None) -> Conflict:
    extra = {"action_id": action_id} if action_id else {}
    return Conflict(
        "an action on this worktree is still pending: wait for the bridge's answer",
        reason="work_action_pending",
        **extra,
    )


async def get_action(s: AsyncSession, who: Principal, action_id: str) -> WorkActionOut:
    """An action, for whoever may read its session's thread."""
    row = await s.get(WorkActionRow, action_id)
    what = f"work action '{action_id}'"
    if row is None:
        raise not_found(what)
    session = await s.get(SessionRow, row.session_id)
    if session is None:
        raise not_found(what)
    await access.Reader(who).ensure_read(s, session, what)
    return action_out(row)


async def worktrees(s: AsyncSession) -> WorktreesOut:
    """Admins: every active worktree, biggest first, and their disk use together."""
    rows = await s.execute(
        select(SessionWorkRow, SessionRow.alias)
        .join(SessionRow, SessionRow.id == SessionWorkRow.session_id)
        .where(SessionWorkRow.state == "active")
        .order_by(SessionWorkRow.bytes.desc(), SessionWorkRow.session_id)
    )
    items = [
        WorktreeItem(
            session_id=w.session_id,
            alias=alias,
            agent=w.agent,
            branch=w.branch,
            path=w.path,
            bytes=w.bytes,
            state=w.state,
            dirty=w.dirty,
            unmerged=w.unmerged,
            updated_at=w.updated_at,
        )
        for w, alias in rows
    ]
    return WorktreesOut(total_bytes=sum(i.bytes for i in items), count=len(items), items=items)


# -- agents ---------------------------------------------------------------------------


async def report(
    s: AsyncSession, agent: Principal, session_id: str, fields: dict[str, Any]
) -> SessionWorkOut:
    """The agent's bridge reports the worktree of a session it runs in (validated
    by the route: api/work.py). Another agent's worktree of the session is not
    overwritten (409 other_agent)."""
    await own_session(s, agent, session_id)
    row = await s.get(SessionWorkRow, session_id)
    if row is None:
        row = SessionWorkRow(session_id=session_id, agent=agent.name)
        s.add(row)
    elif row.agent != agent.name:
        raise Conflict(
            f"the worktree of session '{session_id}' is reported by agent '{row.agent}'",
            reason="other_agent",
        )
    for name, value in fields.items():
        setattr(row, name, value)
    row.updated_at = utcnow()
    await s.flush()
    return work_out(row)


async def agent_actions(
    s: AsyncSession, agent: Principal, status: str | None
) -> list[WorkActionOut]:
    """The agent's actions (its own sessions only), oldest first."""
    stmt = select(WorkActionRow).where(WorkActionRow.agent == agent.name)
    if status is not None:
        stmt = stmt.where(WorkActionRow.status == status)
    rows = await s.scalars(stmt.order_by(WorkActionRow.created_at, WorkActionRow.id).limit(500))
    return [action_out(r) for r in rows]


async def finish_action(
    gw: Gateway,
    agent: Principal,
    action_id: str,
    status: str,
    message: str,
    conflicts: Sequence[str],
) -> WorkActionOut:
    """The bridge's answer to one of its pending actions (404 for another's, 409
    already_finished). A merge refused with conflicts also sends, in the same
    transaction, a mail from the person who asked to the agent in the session: a
    turn that merges the base branch in and resolves them."""
    async with gw.read() as s:
        row = await s.get(WorkActionRow, action_id)
        if row is None or row.agent != agent.name:
            raise not_found(f"work action '{action_id}'")
        if row.status != "pending":
            raise _finished(row.status)
        work = await s.get(SessionWorkRow, row.session_id)
        requester = await s.scalar(select(UserRow).where(UserRow.username == row.requested_by))
        session = await s.get(SessionRow, row.session_id)
        parent = await s.scalar(
            select(MailRow.id)
            .where(MailRow.session_id == row.session_id)
            .order_by(MailRow.seq.desc())
            .limit(1)
        )
    now = utcnow()
    conflict_mail = status == "refused" and row.action == "merge" and bool(conflicts)
    if conflict_mail and (requester is None or parent is None or session is None):
        message = (message + "\n(The conflicts could not be mailed: nobody to send them.)")[
            :MAX_MESSAGE
        ]
    elif conflict_mail and requester is not None and parent is not None and session is not None:
        base = work.base_branch if work is not None and work.base_branch else "the base branch"
        branch = work.branch if work is not None else "your branch"
        sender = Principal("user", requester.id, requester.username, requester.is_admin)
        draft = sending.Draft(
            to=[session_address(session, agent.name)],
            subject=f"Merge refused: conflicts with {base}",
            body=_conflict_body(base, branch, conflicts),
            parent_mail_id=parent,
        )
        finished: list[WorkActionOut] = []

        async def close(s: AsyncSession, _sent: Sent) -> None:
            finished.append(await _close(s, action_id, status, message, conflicts, now))

        try:
            await sending.send(gw, sender, draft, also=close)
            return finished[0]
        except Conflict as e:
            if e.extra.get("reason") == "already_finished":
                raise
            message = _not_mailed(message, e)
        except DomainError as e:  # the person may no longer mail the agent: say so
            message = _not_mailed(message, e)
    async with gw.write() as s:
        return await _close(s, action_id, status, message, conflicts, now)


def _not_mailed(message: str, e: DomainError) -> str:
    logger.warning("a refused merge's conflicts could not be mailed: %s", e.message)
    note = f"\n(The conflicts could not be mailed to the agent: {e.message})"
    return (message + note)[:MAX_MESSAGE]


async def _close(
    s: AsyncSession,
    action_id: str,
    status: str,
    message: str,
    conflicts: Sequence[str],
    now: datetime,
) -> WorkActionOut:
    """Finish the action if it is still pending (one conditional UPDATE: two
    answers cannot both win) and tell the person who asked."""
    done = await s.execute(
        update(WorkActionRow)
        .where(WorkActionRow.id == action_id, WorkActionRow.status == "pending")
        .values(status=status, message=message, conflicts=list(conflicts), finished_at=now)
    )
    if not done.rowcount:  # type: ignore[attr-defined]
        raise _finished("finished")
    row = await s.get(WorkActionRow, action_id, populate_existing=True)
    assert row is not None
    out = action_out(row)
    await log.append(s, [principal_key(row.requested_by, True)], EventType.WORK_ACTION, out)
    return out


def _finished(status: str) -> Conflict:
    return Conflict(f"this action is {status} already", reason="already_finished")


def _conflict_body(base: str, branch: str, conflicts: Sequence[str]) -> str:
    named = list(conflicts[:CONFLICTS_NAMED])
    lines = [
        f"Merging {branch} into {base} was refused: these files conflict with {base}:",
        "",
        *(f"- {p}" for p in named),
    ]
    if len(conflicts) > len(named):
        lines.append(f"- … and {len(conflicts) - len(named)} more")
    lines += [
        "",
        f"Please merge {base} into your branch ({branch}), resolve the conflicts, "
        "commit, and say when it is done; then the merge can be asked for again.",
    ]
    return "\n".join(lines)


async def ask(
    gw: Gateway, agent: Principal, session_id: str, reason: str
) -> tuple[WorkAskOut, bool]:
    """A `system` mail to the session's owners: its worktree is past its retention
    but holds work (`reason`); keep it or discard it. One per unanswered question:
    asked again before an owner kept or discarded it since, nothing is sent
    (returns `created` False). The relay key names the last keep/discard, so the
    database's unique (sender, relay key) holds even for concurrent asks."""
    base = gw.settings.public_url.rstrip("/") if gw.settings.public_url else ""
    async with gw.write() as s:
        session = await own_session(s, agent, session_id)
        work = await s.get(SessionWorkRow, session_id)
        if work is None or work.state != "active":
            raise Conflict(
                f"session '{session.alias}' has no active worktree", reason="no_worktree"
            )
        answered = await s.scalar(
            select(WorkActionRow.id)
            .where(
                WorkActionRow.session_id == session_id,
                WorkActionRow.action.in_(("keep", "discard")),
            )
            .order_by(WorkActionRow.created_at.desc(), WorkActionRow.id.desc())
            .limit(1)
        )
        key = f"work-ask:{session_id}:{answered or '-'}"
        await log.take_event_lock(s)
        found = await s.scalar(
            select(MailRow.id).where(MailRow.from_name == agent.name, MailRow.relay_key == key)
        )
        if found is not None:
            return WorkAskOut(mail_id=found, deduplicated=True), False
        owners = [
            r.name for r in await access.decider_rows(s, session_id) if r.role == access.OWNER
        ]
        if not owners:
            raise Conflict(f"session '{session.alias}' has no owner to ask", reason="no_human")
        link = f"{base}/sessions/{session.id}"
        ctx = await delivery.deliver(
            s,
            session,
            sender=agent.name,
            sender_human=False,
            recipients=[Recipient(n, is_human=True) for n in owners],
            subject=f"Keep or discard the worktree of {session.alias}?",
            body=(
                f"The worktree of session {session.alias} ({work.branch}, {work.path}) is past "
                f"its retention but {reason}. Keep it or discard it:\n\n{link}\n\n"
                f"(or: agentmail work keep {session.id} / agentmail work discard "
                f"{session.id} --yes)"
            ),
            type_=MailType.SYSTEM,
            relay_key=key,
            from_session_id=session_id,
        )
    return WorkAskOut(mail_id=ctx.mail.id, deduplicated=False), True
