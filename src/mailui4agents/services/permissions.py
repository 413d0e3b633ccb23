"""Permission requests, decisions, expiry and grants (docs/behaviour.md#approval-round-trip to
docs/behaviour.md#questions).

Everything here fails closed: no human → refused, unknown mode → workspace,
a request nobody decides expires, archiving cancels what is pending.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value

from mailui4agents.db.tables import GrantRow, PermissionRow, SessionDeciderRow, SessionRow, new_id
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import Conflict, Missing, conflict, invalid_value, not_found
from mailui4agents.domain.grants import GrantRule, grant_matches
from mailui4agents.domain.masking import mask_secrets, mask_text
from mailui4agents.domain.modes import mode_for_deciding
from mailui4agents.domain.results import Duplicate, Opened
from mailui4agents.events import log
from mailui4agents.services import access, delivery, limits
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.services.session_view import get_session
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import GrantOut, JsonObject, PermissionDecisionEvent, PermissionOut

DEFAULT_TIMEOUT_S = 600


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
    )


def _conflict(reason: str, message: str, **extra: Any) -> Conflict:
    return Conflict(message, reason=reason, **extra)


def _request_text(row: PermissionRow, session: SessionRow) -> tuple[str, str]:
    """Subject and body of the permission_request mail (inputs already masked)."""
    if row.kind == "question":
        lines = [f"{row.agent_name} asks: {row.question}", ""]
        for opt in row.options or []:
            desc = f" — {opt['description']}" if opt.get("description") else ""
            lines.append(f"  - {opt['label']}{desc}")
        if row.options:
            lines.append("")
            lines.append("Choose " + ("one or more" if row.multi_select else "one") + ":")
            lines.append(f"  agentmail answer {row.id} --option LABEL")
        else:
            lines.append(f'Answer: agentmail answer {row.id} --text "…"')
        return f"Question: {(row.question or '')[:80]}", "\n".join(lines)
    detail = json.dumps(row.tool_input or {}, ensure_ascii=False, indent=2)
    body = (
        f"{row.agent_name} wants to use {row.tool_name} in {session.workspace or '(no workspace)'}"
        f" (mode {session.permission_mode}).\n\n"
        + (f"{row.summary}\n\n" if row.summary else "")
        + f"{detail}\n\n"
        f"Approve: agentmail approve {row.id} [--note N] [--always]\n"
        f"Deny:    agentmail deny {row.id} --note N\n"
    )
    what = row.summary or (row.tool_input or {}).get("command") or row.tool_name
    return f"Approval needed: {row.tool_name} — {str(what)[:80]}", body


_GRANTS = select(GrantRow.id, GrantRow.tool_name, GrantRow.pattern).where(
    GrantRow.session_id == bindparam("b_session"),
    GrantRow.tool_name == bindparam("b_tool"),
    GrantRow.revoked_at.is_(None),
)
# The session asked in, whether the agent takes part in it, the agent's earlier
# request with this relay key, whether the session has standing grants for the
# tool (_GRANTS reads them only then), and the session's deciders (one row each,
# in deciders()' order; one row with NULL when there are none): one query.
_ASKING = (
    select(
        SessionRow,
        access.takes_part(bindparam("b_agent"), SessionRow.id),
        select(PermissionRow.id)
        .where(
            PermissionRow.relay_key == bindparam("b_key"),
            PermissionRow.agent_name == bindparam("b_agent"),
        )
        .scalar_subquery(),
        _GRANTS.with_only_columns(GrantRow.id).exists(),
        SessionDeciderRow.name,
    )
    .outerjoin(SessionDeciderRow, SessionDeciderRow.session_id == SessionRow.id)
    .where(SessionRow.id == bindparam("b_session"))
    .order_by(SessionDeciderRow.role.desc(), SessionDeciderRow.created_at)
)
_PERMISSIONS = cast(Table, PermissionRow.__table__)
# A relay key taken meanwhile (PostgreSQL: a concurrent request that committed
# first) inserts nothing instead of failing: no savepoint around the insert.
_INSERT_PERMISSION = {
    "sqlite": sqlite_insert(_PERMISSIONS).on_conflict_do_nothing(
        index_elements=["agent_name", "relay_key"]
    ),
    "postgresql": pg_insert(_PERMISSIONS).on_conflict_do_nothing(
        index_elements=["agent_name", "relay_key"]
    ),
}


async def create_request(
    s: AsyncSession,
    agent: Principal,
    *,
    session_id: str,
    kind: str,
    relay_key: str,
    tool_name: str | None,
    tool_input: JsonObject | None,
    summary: str | None,
    question: str | None,
    options: list[JsonObject] | None,
    multi_select: bool,
    timeout_s: int | None,
) -> Opened | Duplicate:
    """Open a request: Opened (its PermissionOut), or Duplicate when this agent
    used `relay_key` before (nothing is written then)."""
    limits.check_relay_key(relay_key)
    if not relay_key:
        raise invalid_value("relay_key", "relay_key must not be empty")
    _validate_shape(kind, tool_name, question, options, multi_select)
    found = (
        await s.execute(
            _ASKING,
            {
                "b_session": session_id,
                "b_agent": agent.name,
                "b_key": relay_key,
                "b_tool": tool_name,
            },
        )
    ).all()
    if not found:
        raise not_found(f"session '{session_id}'")
    session, member, dup, granted = found[0][0], bool(found[0][1]), found[0][2], found[0][3]
    if not member:
        raise not_found(f"session '{session_id}'")
    # Relay keys belong to one agent: another agent's key neither collides with
    # this one nor reveals anything about it.
    if dup is not None:
        # Nobody will ever decide a second request with the same key: deny at once.
        return Duplicate(dup, "request_id")
    if session.status != "active":
        raise _conflict("archived", f"session '{session.alias}' is archived")

    mode = mode_for_deciding(session.permission_mode)
    if kind == "approval" and mode == "full":
        raise _conflict("mode_allows", "the session is in full mode", permission_mode="full")
    if kind == "approval" and mode == "plan":
        raise _conflict(
            "mode_forbids", "the session is in plan mode (read-only)", permission_mode="plan"
        )

    now = utcnow()
    # A plain object, never added to the ORM session: written by _insert's one
    # statement, and what the answer and the events are made of.
    row = PermissionRow(
        id=new_id(),
        session_id=session.id,
        agent_name=agent.name,
        kind=kind,
        tool_name=tool_name,
        tool_input=mask_secrets(tool_input) if tool_input is not None else None,
        summary=mask_text(summary) if summary is not None else None,
        question=question,
        options=options,
        multi_select=multi_select,
        relay_key=relay_key,
        status="pending",
        decision=None,
        note=None,
        answers=None,
        decided_by=None,
        decided_at=None,
        expires_at=now + timedelta(seconds=timeout_s or DEFAULT_TIMEOUT_S),
        mail_id=None,
        grant_id=None,
        created_at=now,
    )
    if kind == "approval" and tool_name is not None and granted:
        grant = await _matching_grant(s, session.id, tool_name, tool_input or {})
        if grant is not None:
            row.status, row.decision = "approved", "approve"
            row.decided_by, row.decided_at, row.grant_id = f"grant:{grant}", now, grant
            if not await _insert(s, row):
                return await _duplicate(s, agent.name, relay_key)
            await log.append(s, [agent.key], EventType.PERMISSION_DECISION, decision_event(row))
            return Opened(permission_out(row, session))

    # Asked of the session's deciders only: a human the agent cc'd in is not one.
    humans = [name for *_, name in found if name is not None]
    if not humans:
        raise _conflict("no_human", "this session has no human who may decide; nobody could")
    row.mail_id = new_id()  # the request names its mail: written with it, in one insert
    if not await _insert(s, row):
        return await _duplicate(s, agent.name, relay_key)
    subject, body = _request_text(row, session)
    out = permission_out(row, session)
    await delivery.deliver(
        s,
        session,
        agent.name,
        False,
        [(h, True, "to") for h in humans],
        subject=subject,
        body=body,
        type_="permission_request",
        mail_id=row.mail_id,
        also=[(principal_key(h, True), EventType.PERMISSION_REQUEST, out) for h in humans],
    )
    return Opened(out)


async def _insert(s: AsyncSession, row: PermissionRow) -> bool:
    """Insert; False when a concurrent request took the relay key first."""
    values = {c.key: getattr(row, c.key) for c in _PERMISSIONS.columns}
    result = await s.execute(_INSERT_PERMISSION[s.get_bind().dialect.name], values)
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def _duplicate(s: AsyncSession, agent: str, relay_key: str) -> Duplicate:
    dup = await s.scalar(
        select(PermissionRow.id).where(
            PermissionRow.relay_key == relay_key, PermissionRow.agent_name == agent
        )
    )
    assert dup is not None  # the unique key that refused our insert is this row's
    return Duplicate(dup, "request_id")


def _validate_shape(
    kind: str,
    tool_name: str | None,
    question: str | None,
    options: list[JsonObject] | None,
    multi_select: bool,
) -> None:
    if kind == "approval":
        if not tool_name:
            raise Missing("tool_name", "an approval names its tool")
        if question is not None or options is not None:
            raise invalid_value("question", "question/options belong to kind 'question'")
        return
    if not question or not question.strip():
        raise Missing("question", "a question needs its text")
    if options is not None:
        labels = [o["label"] for o in options]
        if not labels or any(not label.strip() for label in labels):
            raise invalid_value("options", "options need non-empty labels (or omit options)")
        if len(set(labels)) != len(labels):
            raise invalid_value("options", "option labels must be unique")
    elif multi_select:
        raise invalid_value("multi_select", "multi_select needs options")


async def _matching_grant(
    s: AsyncSession, session_id: str, tool_name: str, tool_input: JsonObject
) -> str | None:
    """The id of a standing grant of the session that allows this call, if any."""
    grants = await s.execute(_GRANTS, {"b_session": session_id, "b_tool": tool_name})
    for grant_id, grant_tool, pattern in grants:
        if grant_matches(GrantRule(grant_tool, pattern), tool_name, tool_input):
            return str(grant_id)
    return None


def _check_answers(row: PermissionRow, answers: list[str] | None) -> list[str] | None:
    if row.kind != "question":
        if answers is not None:
            raise invalid_value("answers", "answers belong to questions, not approvals")
        return None
    if not answers or any(not a.strip() for a in answers):
        raise invalid_value("answers", "an answer must not be empty")
    if row.options is None:
        return answers
    labels = [o["label"] for o in row.options]
    unknown = [a for a in answers if a not in labels]
    if unknown:
        raise invalid_value(
            "answers", f"unknown option {unknown[0]!r}; the options are: {', '.join(labels)}"
        )
    if not row.multi_select and len(answers) != 1:
        raise invalid_value("answers", "this question takes exactly one option")
    return list(dict.fromkeys(answers))


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


_OTHER = aliased(PermissionRow)
# The request, its session, whether the human takes part in it, whether a pending
# request of the session is past its deadline, and the session's deciders (one
# row each, in deciders()' order; one row with NULL when there are none): one
# query, built once.
_DECIDING = (
    select(
        PermissionRow,
        SessionRow,
        access.takes_part(bindparam("b_name"), SessionRow.id),
        select(_OTHER.id)
        .where(
            _OTHER.session_id == PermissionRow.session_id,
            _OTHER.status == "pending",
            _OTHER.expires_at <= bindparam("b_now"),
        )
        .exists(),
        SessionDeciderRow.name,
    )
    .join(SessionRow, SessionRow.id == PermissionRow.session_id)
    .outerjoin(SessionDeciderRow, SessionDeciderRow.session_id == SessionRow.id)
    .where(PermissionRow.id == bindparam("b_id"))
    .order_by(SessionDeciderRow.role.desc(), SessionDeciderRow.created_at)
)
_SETTLE = (
    update(_PERMISSIONS)
    .where(_PERMISSIONS.c.id == bindparam("b_id"), _PERMISSIONS.c.status == "pending")
    .values(
        status=bindparam("b_status"),
        decision=bindparam("b_decision"),
        note=bindparam("b_note"),
        answers=bindparam("b_answers"),
        decided_by=bindparam("b_by"),
        decided_at=bindparam("b_at"),
        grant_id=bindparam("b_grant"),
    )
)
_INSERT_GRANT = insert(cast(Table, GrantRow.__table__))


def _settled(row: PermissionRow, **values: Any) -> None:
    """Set what a Core statement just wrote on the loaded row, without making
    it dirty (no second UPDATE by the ORM's flush)."""
    for key, value in values.items():
        set_committed_value(row, key, value)


async def decide(
    s: AsyncSession,
    human: Principal,
    request_id: str,
    *,
    decision: str,
    note: str | None,
    always: bool,
    grant_pattern: str | None,
    answers: list[str] | None,
) -> PermissionOut:
    """A decider of the request's session approves or denies it (once)."""
    what = f"permission request '{request_id}'"
    now = utcnow()
    found = (
        await s.execute(_DECIDING, {"b_id": request_id, "b_name": human.name, "b_now": now})
    ).all()
    if not found:
        raise not_found(what)
    row, session, member, due = found[0][0], found[0][1], bool(found[0][2]), bool(found[0][3])
    deciders = [name for *_, name in found if name is not None]
    access.Reader(human).ensure_decide_known(session, member, deciders, what)
    if due:  # expire what is past its deadline first (this request too, maybe)
        await expire_due(s, row.session_id)
    if row.status != "pending":
        raise conflict(f"request already {row.status}", reason="already_decided")
    checked: list[str] | None = None
    if decision == "approve":
        checked = _check_answers(row, answers)
    elif answers is not None:
        raise invalid_value("answers", "a refusal carries no answers")
    if always and (row.kind != "approval" or decision != "approve"):
        raise invalid_value("always", "'always' applies to approving a tool request")
    if grant_pattern is not None and not always:
        raise invalid_value("grant_pattern", "grant_pattern goes with always=true")
    grant_id = None
    if always:
        # Before the request's UPDATE, which then names it; a request decided
        # meanwhile fails that UPDATE and the whole transaction, grant included.
        grant_id = new_id()
        await s.execute(
            _INSERT_GRANT,
            {
                "id": grant_id,
                "session_id": row.session_id,
                "tool_name": str(row.tool_name),
                "pattern": grant_pattern,
                "created_by": human.name,
                "request_id": row.id,
                "created_at": now,
                "revoked_at": None,
            },
        )
    status = "approved" if decision == "approve" else "denied"
    result = await s.execute(
        _SETTLE,
        {
            "b_id": row.id,
            "b_status": status,
            "b_decision": decision,
            "b_note": note,
            "b_answers": checked,
            "b_by": human.name,
            "b_at": now,
            "b_grant": grant_id,
        },
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        raise conflict("request already decided", reason="already_decided")
    _settled(
        row,
        status=status,
        decision=decision,
        note=note,
        answers=checked,
        decided_by=human.name,
        decided_at=now,
        grant_id=grant_id,
    )
    await _announce(s, session, row, human.name, True, deciders)
    return permission_out(row, session)


async def _announce(
    s: AsyncSession,
    session: SessionRow,
    row: PermissionRow,
    sender: str,
    sender_human: bool,
    deciders: list[str] | None = None,
) -> None:
    """The decision event to all of the agent's streams (and the humans' UIs), and a
    receipt mail in the thread — a receipt, never a new task. `deciders`: the
    session's, if the caller has them already."""
    word = {"approved": "Approved", "denied": "Denied"}.get(row.status, row.status.capitalize())
    what = row.tool_name if row.kind == "approval" else "question"
    body = f"{word}: {what} (request {row.id})."
    if row.answers:
        body += "\nAnswer: " + ", ".join(row.answers)
    if row.note:
        body += f"\nNote from {row.decided_by}: {row.note}"
    humans = await access.deciders(s, session.id) if deciders is None else deciders
    targets = [principal_key(row.agent_name, False), *(principal_key(h, True) for h in humans)]
    event = decision_event(row)
    await delivery.deliver(
        s,
        session,
        sender,
        sender_human,
        [(row.agent_name, False, "to")],
        subject=f"{word}: {what}",
        body=body,
        type_="permission_decision",
        parent_mail_id=row.mail_id,
        also=[(target, EventType.PERMISSION_DECISION, event) for target in targets],
    )


async def _close(s: AsyncSession, rows: list[PermissionRow], status: str, by: str) -> int:
    closed = 0
    now = utcnow()
    for row in rows:
        result = await s.execute(
            update(PermissionRow)
            .where(PermissionRow.id == row.id, PermissionRow.status == "pending")
            .values(status=status, decision=status, decided_by=by, decided_at=now)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            continue  # decided meanwhile (another replica or a human)
        _settled(row, status=status, decision=status, decided_by=by, decided_at=now)
        session = await get_session(s, row.session_id)
        await _announce(s, session, row, "system", False)
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
    return await _close(s, rows, "expired", "system")


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
    return await _close(s, rows, "cancelled", by)


async def list_for_human(
    s: AsyncSession, human: Principal, status: str | None, session_id: str | None, limit: int
) -> list[PermissionOut]:
    stmt = select(PermissionRow, SessionRow).join(
        SessionRow, SessionRow.id == PermissionRow.session_id
    )
    # What this human may decide, nothing else (admins included: docs/access.md).
    decidable = select(SessionDeciderRow.session_id).where(SessionDeciderRow.name == human.name)
    stmt = stmt.where(PermissionRow.session_id.in_(decidable))
    if status == "pending":
        stmt = stmt.where(PermissionRow.status == "pending")
    elif status == "decided":
        stmt = stmt.where(PermissionRow.status != "pending")
    if session_id is not None:
        stmt = stmt.where(PermissionRow.session_id == session_id)
    stmt = stmt.order_by(PermissionRow.created_at.desc()).limit(limit)
    return [permission_out(p, sess) for p, sess in (await s.execute(stmt)).all()]


def grant_out(g: GrantRow) -> GrantOut:
    return GrantOut(
        id=g.id,
        session_id=g.session_id,
        tool_name=g.tool_name,
        pattern=g.pattern,
        created_by=g.created_by,
        request_id=g.request_id,
        created_at=g.created_at,
        revoked_at=g.revoked_at,
    )


async def list_grants(
    s: AsyncSession, human: Principal, session_id: str | None, include_revoked: bool
) -> list[GrantOut]:
    # One query, not one participant lookup per grant.
    stmt = select(GrantRow).where(GrantRow.session_id.in_(access.Reader(human).readable_ids()))
    if session_id is not None:
        stmt = stmt.where(GrantRow.session_id == session_id)
    if not include_revoked:
        stmt = stmt.where(GrantRow.revoked_at.is_(None))
    return [grant_out(g) for g in (await s.scalars(stmt.order_by(GrantRow.created_at))).all()]


async def revoke_grant(s: AsyncSession, human: Principal, grant_id: str) -> GrantOut:
    g = await s.get(GrantRow, grant_id)
    if g is None:
        raise not_found(f"grant '{grant_id}'")
    if not human.is_admin:
        # Admins may revoke any grant: revoking only takes power away (docs/access.md).
        session = await get_session(s, g.session_id)
        await access.Reader(human).ensure_decide(s, session, f"grant '{grant_id}'")
    if g.revoked_at is None:
        g.revoked_at = utcnow()
        await s.flush()
    return grant_out(g)
