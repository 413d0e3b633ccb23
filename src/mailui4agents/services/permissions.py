"""Permission requests as stored: their wire form, reading them, closing them
(expiry, cancelling) and announcing a decision (docs/behaviour.md#approval-round-trip
to docs/behaviour.md#questions).

Opening a request is services/permission_requests.py, deciding one
services/permission_decisions.py, standing grants services/grants.py. Everything
fails closed: no human → refused, unknown mode → workspace, a request nobody
decides expires, archiving cancels what is pending.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from mailui4agents import metrics
from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.decided_via import via_text
from mailui4agents.domain.errors import Conflict, not_found
from mailui4agents.domain.mail_types import MailType, Recipient
from mailui4agents.domain.times import rfc3339
from mailui4agents.services import access, audit, delivery, push
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.services.session_summary import get_session
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import DecidedVia, PermissionDecisionEvent, PermissionOut


def _via(row: PermissionRow) -> DecidedVia | None:
    if row.decided_channel is None:
        return None
    if row.decided_device is None:  # unset, not null: left out of the answer
        return DecidedVia(channel=row.decided_channel)
    return DecidedVia(channel=row.decided_channel, device=row.decided_device)


def permission_out(row: PermissionRow, session: SessionRow | None = None) -> PermissionOut:
    """PermissionOut; with `session`, plus where it is asked (`session_alias`,
    `workspace`, `permission_mode`: lists and the `permission_request` event)."""
    out = PermissionOut(
        id=row.id,
        session_id=row.session_id,
        kind=row.kind,
        agent=row.agent_name,
        tool_name=row.tool_name,
        tool_input=row.tool_input,
        summary=row.summary,
        question=row.question,
        options=row.options,  # stored JSON, validated into OptionOut here
        multi_select=row.multi_select,
        status=row.status,
        decision=row.decision,
        note=row.note,
        answers=row.answers,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        decided_via=_via(row),
        expires_at=row.expires_at,
        relay_key=row.relay_key,
        mail_id=row.mail_id,
        grant_id=row.grant_id,
        created_at=row.created_at,
    )
    if session is not None:
        extra = {
            "session_alias": session.alias,
            "workspace": session.workspace,
            "permission_mode": session.permission_mode,
        }
        out = out.model_copy(update=extra)
    return out


def ago(moment: datetime, now: datetime) -> str:
    """ "12 s", "5 min", "3 h", "2 d"."""
    seconds = max(0, int((now - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def already_decided(row: PermissionRow, now: datetime | None = None) -> Conflict:
    """409 `already_decided` for a request that is no longer pending: who settled
    it, from where, when (docs/remote.md, "First answer wins"), in the body and
    in the message ("request already decided by ana from the web, 12 s ago:
    approved"; "request already expired: timed out 3 s ago")."""
    when = row.decided_at or row.created_at
    since = ago(when, now or utcnow())
    if row.status in ("expired", "cancelled"):
        message = f"request already {row.status}: {push.settled_text(row)} {since} ago"
    else:
        via = via_text(row.decided_channel, row.decided_device)
        outcome = "answered" if row.kind == "question" and row.status == "approved" else row.status
        message = f"request already decided by {push.who_decided(row)}{via}, {since} ago: {outcome}"
    extra: dict[str, Any] = {
        "outcome": row.status,  # approved, denied, expired, cancelled
        "decided_by": row.decided_by,
        "channel": row.decided_channel,
        "decided_at": rfc3339(when),
    }
    if row.decided_device:
        extra["device"] = row.decided_device
    return Conflict(message, reason="already_decided", **extra)


def decision_event(row: PermissionRow) -> PermissionDecisionEvent:
    return PermissionDecisionEvent(
        request_id=row.id,
        relay_key=row.relay_key,
        session_id=row.session_id,
        kind=row.kind,
        status=row.status,
        decision=row.decision,
        note=row.note,
        answers=row.answers,
        decided_by=row.decided_by,
        decided_via=_via(row),
    )


async def get_request(s: AsyncSession, request_id: str) -> PermissionRow:
    row = await s.get(PermissionRow, request_id)
    if row is None:
        raise not_found(f"permission request '{request_id}'")
    return row


async def own_request(s: AsyncSession, agent: Principal, request_id: str) -> PermissionRow:
    """The agent's own request: another agent's request does not exist for it."""
    row = await get_request(s, request_id)
    if row.agent_name != agent.name:
        raise not_found(f"permission request '{request_id}'")
    return row


def settled(row: PermissionRow, **values: Any) -> None:
    """Set what a Core statement just wrote on the loaded row, without making
    it dirty (no second UPDATE by the ORM's flush)."""
    for key, value in values.items():
        set_committed_value(row, key, value)


def _count_settled(s: AsyncSession, row: PermissionRow, by_person: bool) -> None:
    """The settlement's metrics (metrics.py), counted once committed: its status,
    and the time a person took to decide."""
    metrics.note(s, "permission_decisions", row.status)
    if by_person and row.decided_at is not None and row.created_at is not None:
        waited = (row.decided_at - row.created_at).total_seconds()
        metrics.note(s, "decision_seconds", row.status, max(0.0, waited))


async def announce(
    s: AsyncSession,
    session: SessionRow,
    row: PermissionRow,
    *,
    sender: str,
    sender_human: bool,
    deciders: list[str] | None = None,
) -> None:
    """The decision event to all of the agent's streams (and the humans' UIs), and a
    receipt mail in the thread — a receipt, never a new task. `deciders`: the
    session's, if the caller has them already."""
    word = {"approved": "Approved", "denied": "Denied"}.get(row.status, row.status.capitalize())
    if answered_in_terminal(row.status, row.decided_channel):
        word = "Answered in the terminal"
    what = row.tool_name if row.kind == "approval" else "question"
    body = f"{word}: {what} (request {row.id})."
    if row.answers:
        body += "\nAnswer: " + ", ".join(row.answers)
    if row.note:
        body += f"\nNote from {row.decided_by}: {row.note}"
    _count_settled(s, row, sender_human)
    humans = await access.deciders(s, session.id) if deciders is None else deciders
    targets = [principal_key(row.agent_name, False), *(principal_key(h, True) for h in humans)]
    event = decision_event(row)
    await delivery.deliver(
        s,
        session,
        sender=sender,
        sender_human=sender_human,
        recipients=[Recipient(row.agent_name, is_human=False)],
        subject=f"{word}: {what}",
        body=body,
        type_=MailType.PERMISSION_DECISION,
        parent_mail_id=row.mail_id,
        also=[(target, EventType.PERMISSION_DECISION, event) for target in targets],
    )


async def _close(
    s: AsyncSession,
    rows: list[PermissionRow],
    status: str,
    by: str,
    *,
    channel: str = "system",
    actor: tuple[str, str | None],
    reason: str,
) -> int:
    """Close `rows` that are still pending as `status`, each with its audit row
    (`actor`: its kind and name, services/audit.py)."""
    closed = 0
    now = utcnow()
    # Nobody decided here: the gateway settled it, or the agent's terminal
    # answered first (docs/remote.md, "First answer wins").
    values = {
        "status": status,
        "decision": status,
        "decided_by": by,
        "decided_at": now,
        "decided_channel": channel,
        "decided_device": None,
    }
    for row in rows:
        result = await s.execute(
            update(PermissionRow)
            .where(PermissionRow.id == row.id, PermissionRow.status == "pending")
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            continue  # decided meanwhile (another replica or a human)
        settled(row, **values)
        await audit.record_settled(s, row, actor_kind=actor[0], actor=actor[1], reason=reason)
        session = await get_session(s, row.session_id)
        await announce(s, session, row, sender="system", sender_human=False)
        await push.queue_settled(s, row)
        closed += 1
    return closed


async def expire_due(s: AsyncSession, session_id: str | None = None) -> int:
    """Expire pending requests past their deadline: nothing stays pending forever."""
    stmt = select(PermissionRow).where(
        PermissionRow.status == "pending", PermissionRow.expires_at <= utcnow()
    )
    if session_id is not None:
        stmt = stmt.where(PermissionRow.session_id == session_id)
    rows = list((await s.scalars(stmt.limit(200))).all())
    reason = "nobody decided before the request's deadline"
    return await _close(s, rows, "expired", "system", actor=("timeout", None), reason=reason)


async def any_due(s: AsyncSession) -> bool:
    due = await s.scalar(
        select(PermissionRow.id)
        .where(PermissionRow.status == "pending", PermissionRow.expires_at <= utcnow())
        .limit(1)
    )
    return due is not None


async def cancel_pending(s: AsyncSession, session_id: str, by: str) -> int:
    rows = list(
        (
            await s.scalars(
                select(PermissionRow).where(
                    PermissionRow.session_id == session_id, PermissionRow.status == "pending"
                )
            )
        ).all()
    )
    reason = "the session was archived"
    return await _close(s, rows, "cancelled", by, actor=("person", by), reason=reason)


#: How many pending requests one withdrawal may close (a terminal answers one
#: dialog at a time; a few more allow for parallel tool calls).
MAX_WITHDRAWN = 20


async def withdraw_answered(s: AsyncSession, agent: Principal, relay_key_prefix: str) -> list[str]:
    """The agent's terminal answered its own dialog first: close the agent's
    pending requests whose relay key starts with ``relay_key_prefix`` as
    "answered in the terminal" (status ``cancelled``, channel ``terminal``), so
    no page or notification offers a decision nobody waits for. The ids closed
    (none when a human decided first: that decision stands)."""
    rows = list(
        (
            await s.scalars(
                select(PermissionRow)
                .where(
                    PermissionRow.agent_name == agent.name,
                    PermissionRow.status == "pending",
                    PermissionRow.relay_key.startswith(relay_key_prefix, autoescape=True),
                )
                .order_by(PermissionRow.created_at)
                .limit(MAX_WITHDRAWN)
            )
        ).all()
    )
    closed = rows
    await _close(
        s,
        closed,
        "cancelled",
        agent.name,
        channel="terminal",
        actor=("terminal", agent.name),
        reason="answered in the agent's terminal",
    )
    return [row.id for row in closed if row.decided_channel == "terminal"]


def answered_in_terminal(status: str | None, channel: str | None) -> bool:
    """A request the agent's own terminal answered (:func:`withdraw_answered`)."""
    return status == "cancelled" and channel == "terminal"


async def list_for_human(
    s: AsyncSession, human: Principal, status: str | None, session_id: str | None, limit: int
) -> list[PermissionOut]:
    stmt = select(PermissionRow, SessionRow).join(
        SessionRow, SessionRow.id == PermissionRow.session_id
    )
    # What this human may decide, nothing else (admins included: docs/access.md).
    stmt = stmt.where(access.decides(human.name, PermissionRow.session_id))
    if status == "pending":
        stmt = stmt.where(PermissionRow.status == "pending")
    elif status == "decided":
        stmt = stmt.where(PermissionRow.status != "pending")
    if session_id is not None:
        stmt = stmt.where(PermissionRow.session_id == session_id)
    stmt = stmt.order_by(PermissionRow.created_at.desc()).limit(limit)
    return [permission_out(p, sess) for p, sess in (await s.execute(stmt)).all()]


async def count_pending(s: AsyncSession) -> int:
    """Requests waiting for a decision, in one COUNT (GET /metrics)."""
    n = await s.scalar(
        select(func.count()).select_from(PermissionRow).where(PermissionRow.status == "pending")
    )
    return int(n or 0)
