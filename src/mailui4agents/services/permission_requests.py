"""Opening a permission request or a question (docs/behaviour.md#approval-round-trip,
docs/behaviour.md#questions): one query reads all it needs, one statement writes it.

Fails closed: not a member → the session does not exist; no decider → refused; an
approval in full mode is refused (`mode_allows`), in plan mode too (`mode_forbids`).
Before the mode, rules decide (docs/rules.md, services/rules.py): a deny rule
denies at once in every mode, an ask rule sends it to a human whatever would
allow it; a standing grant or an allow rule that matches approves at once,
without a mail.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents import metrics
from mailui4agents.db.base import new_id
from mailui4agents.db.tables import GrantRow, PermissionRow, SessionDeciderRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import Conflict, Missing, invalid_value, not_found
from mailui4agents.domain.grants import GrantRule
from mailui4agents.domain.mail_types import MailType, Recipient
from mailui4agents.domain.masking import mask_secrets, mask_text
from mailui4agents.domain.modes import mode_for_deciding
from mailui4agents.domain.results import Duplicate, Opened
from mailui4agents.domain.rules import Decision, model_reason
from mailui4agents.events import log
from mailui4agents.services import (
    access,
    audit,
    delivery,
    email_request,
    notify_policy,
    permissions,
    push,
    rules,
    size_limits,
)
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import JsonObject

DEFAULT_TIMEOUT_S = 600


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


_GRANTS = select(GrantRow.id, GrantRow.tool_name, GrantRow.pattern, GrantRow.scope).where(
    GrantRow.session_id == bindparam("b_session"),
    GrantRow.tool_name == bindparam("b_tool"),
    GrantRow.revoked_at.is_(None),
)
# The session asked in, whether the agent takes part in it, the agent's earlier
# request with this relay key, whether the session has standing grants for the
# tool (_GRANTS reads them only then), and the session's deciders (one row each,
# access.with_deciders; one row with NULL when there are none) with whether each
# has a device subscribed to pushes (services/push.py looks further only then):
# one query.
_ASKING = access.with_deciders(
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
        rules.HAS_RULES,  # docs/rules.md: the rules are read only when one may apply
        SessionDeciderRow.name,
        push.has_push_subscription(SessionDeciderRow.name),
    ).where(SessionRow.id == bindparam("b_session")),
    SessionRow.id,
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


@audit.audited  # every answer recorded in this transaction (services/audit.py)
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
    rules_file_sha256: str | None = None,
    sandbox: str | None = None,
) -> Opened | Duplicate:
    """Open a request: Opened (its PermissionOut), or Duplicate when this agent
    used `relay_key` before (nothing is written then)."""
    size_limits.check_relay_key(relay_key)
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
    has_rules = bool(found[0][4])
    if not member:
        raise not_found(f"session '{session_id}'")
    # Relay keys belong to one agent: another agent's key neither collides with
    # this one nor reveals anything about it.
    if dup is not None:
        # Nobody will ever decide a second request with the same key: deny at once.
        return Duplicate(dup, "request_id")
    if session.status != "active":
        raise _conflict("archived", f"session '{session.alias}' is archived")

    # Rules before the human (docs/rules.md): deny rules, plan, ask rules, grants
    # and allow rules, full mode, in that order (domain/rules.decide).
    verdict: Decision | None = None
    if kind == "approval" and tool_name is not None:
        grants = await _grants(s, session.id, tool_name) if granted else []
        deciders = [name for *_, name, _push in found if name is not None]
        verdict = await rules.decision(
            s,
            session,
            tool_name,
            tool_input or {},
            deciders=deciders,
            has_rules=has_rules,
            grants=grants,
            file_sha256=rules_file_sha256,
        )
        if verdict.outcome == "mode_allows":
            raise _conflict("mode_allows", "the session is in full mode", permission_mode="full")
        if verdict.outcome == "mode_forbids":
            raise _conflict(
                "mode_forbids", "the session is in plan mode (read-only)", permission_mode="plan"
            )
        # The sandbox (docs/sandbox.md): a bridge that proved its boundary for this
        # turn has the kernel refuse every write outside the workspace, so workspace
        # mode lets the call run without asking: after the deny rules and the mode,
        # and never where an ask rule sent the call to a person (verdict.rule).
        if (
            verdict.outcome == "human"
            and verdict.rule is None
            and sandbox == "proven"
            and mode_for_deciding(session.permission_mode) == "workspace"
        ):
            raise _conflict(
                "mode_allows",
                "the bridge proved its sandbox: the kernel confines this call to the workspace",
                permission_mode="workspace",
                allowed_by="sandbox",
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
    if verdict is not None and verdict.outcome in ("allow", "deny"):
        # Decided at once, by a grant or a rule: the row is written decided.
        assert verdict.by is not None
        allows = verdict.outcome == "allow"
        row.status, row.decision = ("approved", "approve") if allows else ("denied", "deny")
        row.decided_by, row.decided_at = verdict.by, now
        if verdict.by.startswith("grant:"):
            row.grant_id, row.decided_channel = verdict.by.removeprefix("grant:"), "grant"
        else:
            row.decided_channel, row.note = "rule", model_reason(verdict)
        if not await _insert(s, row):
            return await _duplicate(s, agent.name, relay_key)
        await log.append(
            s, [agent.key], EventType.PERMISSION_DECISION, permissions.decision_event(row)
        )
        return Opened(permissions.permission_out(row, session))

    # Asked of the session's deciders only: a human the agent cc'd in is not one.
    humans = [name for *_, name, _push in found if name is not None]
    if not humans:
        raise _conflict("no_human", "this session has no human who may decide; nobody could")
    row.mail_id = new_id()  # the request names its mail: written with it, in one insert
    if not await _insert(s, row):
        return await _duplicate(s, agent.name, relay_key)
    subject, body = _request_text(row, session)
    out = permissions.permission_out(row, session)
    await delivery.deliver(
        s,
        session,
        sender=agent.name,
        sender_human=False,
        recipients=[Recipient(h, is_human=True) for h in humans],
        subject=subject,
        body=body,
        type_=MailType.PERMISSION_REQUEST,
        mail_id=row.mail_id,
        also=[(principal_key(h, True), EventType.PERMISSION_REQUEST, out) for h in humans],
    )
    # Pushed to the deciders' devices, in this transaction (sent after commit):
    # nothing more is read when no decider has a subscribed device.
    subscribed = [name for *_, name, has_push in found if name is not None and has_push]
    if subscribed:
        people = await notify_policy.first_push(s, session.id, subscribed, now)
        await push.queue_request(s, row, session, people)
    await email_request.queue_request(s, row, session, humans)  # docs/email.md
    return Opened(out)


async def _insert(s: AsyncSession, row: PermissionRow) -> bool:
    """Insert; False when a concurrent request took the relay key first."""
    values = {c.key: getattr(row, c.key) for c in _PERMISSIONS.columns}
    result = await s.execute(_INSERT_PERMISSION[s.get_bind().dialect.name], values)
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    # asked (pending), or approved/denied at once by a grant or a rule (metrics.py)
    metrics.note(s, "permission_requests", "asked" if row.status == "pending" else row.status)
    return True


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


async def _grants(s: AsyncSession, session_id: str, tool_name: str) -> list[tuple[str, GrantRule]]:
    """The session's standing grants for the tool, as (id, rule)."""
    rows = await s.execute(_GRANTS, {"b_session": session_id, "b_tool": tool_name})
    return [(str(gid), GrantRule(tool, pattern, scope)) for gid, tool, pattern, scope in rows]
