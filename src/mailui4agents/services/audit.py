"""The audit trail (docs/audit.md): every decision on a tool call or a question —
who or what decided, through which channel and device, what, when, in which mode,
and how long the agent waited — written by `record` in the transaction that makes
the decision: a decision rolled back leaves no row, a row never lacks its
decision. One INSERT, no read before it (the session's mode and enforcement are
subqueries of the INSERT).

The decision points, each calling one function here:
- services/permission_requests.create_request is `audited`: a request decided as
  it is opened (`decided_by` "grant:<id>", "rule:<id>": any "kind:id" lands as that
  actor kind and id) and the answers that open no request (409 `mode_allows`, also
  with `allowed_by: "sandbox"`, `mode_forbids`, `no_human`, `archived`);
- services/permission_decisions.decide: a person, through every channel (web, api,
  cli, push, email);
- services/permissions._close: a timeout, a withdrawal by the agent's terminal,
  archiving the session.

Rows are never changed or deleted: no code here or elsewhere does, and the
database refuses it (migration 0022's triggers).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, cast

from sqlalchemy import Table, bindparam, false, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.audit_tables import AuditRow
from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import Conflict, invalid_value
from mailui4agents.domain.masking import mask_secrets, mask_text
from mailui4agents.domain.results import Duplicate, Opened, Refused
from mailui4agents.services import access
from mailui4agents.services.principals import Principal
from mailui4agents.wire.audit import AuditActor, AuditOut
from mailui4agents.wire.models import PermissionOut

OUTCOMES = (
    "approved",
    "denied",
    "answered",  # a question answered (its request's status is "approved")
    "expired",
    "cancelled",  # the session was archived
    "withdrawn",  # the agent's terminal answered first
    "mode_allows",
    "mode_forbids",
    "no_human",
    "archived",
)
ACTOR_KINDS = ("person", "rule", "grant", "mode", "sandbox", "timeout", "terminal", "system")

#: The refusals of create_request that are decisions without a request: recorded,
#: committed, then answered (409). Each is raised before anything is written.
ANSWERED_WITHOUT_REQUEST = {
    "mode_allows": "mode",
    "mode_forbids": "mode",
    "no_human": "system",
    "archived": "system",
}
SUMMARY_CHARS = 200
_PREVIEW_KEYS = ("command", "file_path", "notebook_path", "path", "url", "pattern")

_AUDIT = cast(Table, AuditRow.__table__)
_VALUES = (
    "at",
    "asked_at",
    "request_id",
    "agent_name",
    "kind",
    "tool_name",
    "summary",
    "outcome",
    "actor_kind",
    "actor",
    "channel",
    "device",
    "waited_ms",
    "reason",
)


def _of_session(column: Any) -> Any:
    return select(column).where(SessionRow.id == bindparam("b_session")).scalar_subquery()


# inline(): no RETURNING of the new id on PostgreSQL (nobody reads it).
_INSERT = (
    insert(_AUDIT)
    .inline()
    .values(
        session_id=bindparam("b_session"),
        permission_mode=_of_session(SessionRow.permission_mode),
        enforcement=_of_session(SessionRow.permission_enforcement),
        **{name: bindparam(f"b_{name}") for name in _VALUES},
    )
)


def summary_of(kind: str, question: str | None, tool_input: Any, summary: str | None) -> str | None:
    """What was asked, on one line, masked, at most SUMMARY_CHARS characters: the
    question, else the input's command or path, else the agent's summary, else the
    whole input as JSON."""
    if kind == "question":
        return _clip(question or "")
    if isinstance(tool_input, dict):
        # None of these keys is a secret's name (domain/masking.is_secret_key), so
        # their text masked (in _clip) is what mask_secrets makes of it: the
        # rest of the input is never masked for nothing.
        for key in _PREVIEW_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return _clip(value)
    if summary:
        return _clip(summary)
    if tool_input is None:
        return None
    return _clip(json.dumps(mask_secrets(tool_input), ensure_ascii=False, separators=(",", ":")))


def _clip(text: str) -> str:
    text = " ".join(mask_text(text).split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def actor_of(decided_by: str | None) -> tuple[str, str | None]:
    """(actor kind, actor) of a request decided as it was opened: "grant:<id>" →
    ("grant", id), "rule:<id>" → ("rule", id), any other "kind:id" with a short
    word before the colon likewise; anything else is the gateway's own
    ("system", decided_by). Only for what no person decided: a person's name may
    hold a colon, so a person's decision names its actor itself."""
    kind, colon, ident = (decided_by or "").partition(":")
    if colon and kind.isalpha() and len(kind) <= 10:
        return kind.lower(), ident
    return "system", decided_by


def outcome_of(status: str, kind: str, channel: str | None) -> str:
    if status == "approved" and kind == "question":
        return "answered"
    if status == "cancelled" and channel == "terminal":
        return "withdrawn"
    return status


async def record(
    s: AsyncSession,
    *,
    at: datetime,
    asked_at: datetime,
    request_id: str | None,
    session_id: str,
    agent: str,
    kind: str,
    tool_name: str | None,
    summary: str | None,
    outcome: str,
    actor_kind: str,
    actor: str | None,
    channel: str | None,
    device: str | None,
    reason: str | None,
) -> None:
    """Append one decision to the trail, in `s`'s transaction (one INSERT)."""
    waited_ms = max(0, int((at - asked_at).total_seconds() * 1000))
    values = {
        "at": at,
        "asked_at": asked_at,
        "request_id": request_id,
        "agent_name": agent,
        "kind": kind,
        "tool_name": tool_name,
        "summary": summary,
        "outcome": outcome,
        "actor_kind": actor_kind,
        "actor": actor,
        "channel": channel,
        "device": device,
        "waited_ms": waited_ms,
        "reason": reason,
    }
    await s.execute(_INSERT, {"b_session": session_id, **{f"b_{k}": v for k, v in values.items()}})


async def record_settled(
    s: AsyncSession,
    row: PermissionRow,
    *,
    actor_kind: str,
    actor: str | None,
    reason: str | None = None,
) -> None:
    """A request just settled (its row shows the decision): by a person
    (services/permission_decisions.py), a timeout, the terminal or archiving
    (services/permissions._close). `reason` defaults to the decider's note."""
    await record(
        s,
        at=row.decided_at or utcnow(),
        asked_at=row.created_at,
        request_id=row.id,
        session_id=row.session_id,
        agent=row.agent_name,
        kind=row.kind,
        tool_name=row.tool_name,
        summary=summary_of(row.kind, row.question, row.tool_input, row.summary),
        outcome=outcome_of(row.status, row.kind, row.decided_channel),
        actor_kind=actor_kind,
        actor=actor,
        channel=row.decided_channel,
        device=row.decided_device,
        reason=reason if reason is not None else row.note,
    )


async def record_opened(s: AsyncSession, out: PermissionOut) -> None:
    """A request create_request wrote: recorded when it was decided at once (a
    grant, a rule), with the actor its `decided_by` names; nothing while pending."""
    if out.status == "pending":
        return
    actor_kind, actor = actor_of(out.decided_by)
    via = out.decided_via
    await record(
        s,
        at=out.decided_at or out.created_at,
        asked_at=out.created_at,
        request_id=out.id,
        session_id=out.session_id,
        agent=out.agent,
        kind=out.kind,
        tool_name=out.tool_name,
        summary=summary_of(out.kind, out.question, out.tool_input, out.summary),
        outcome=outcome_of(out.status, out.kind, via.channel if via else None),
        actor_kind=actor_kind,
        actor=actor,
        channel=via.channel if via else actor_kind,
        device=via.device if via else None,
        reason=out.note,
    )


async def record_refused(
    s: AsyncSession, agent: Principal, ask: dict[str, Any], refused: Conflict
) -> None:
    """An answer create_request gave without opening a request (`ask` is its
    keyword arguments): the mode's (or, with `allowed_by: "sandbox"`, the proven
    sandbox's), or the gateway's when nobody could decide."""
    reason = str(refused.extra.get("reason"))
    actor_kind = ANSWERED_WITHOUT_REQUEST[reason]
    actor = None
    if refused.extra.get("allowed_by") == "sandbox":
        actor_kind = "sandbox"
    elif actor_kind == "mode":
        actor = str(refused.extra.get("permission_mode") or "") or None
    kind = str(ask.get("kind") or "approval")
    now = utcnow()
    await record(
        s,
        at=now,
        asked_at=now,
        request_id=None,
        session_id=str(ask["session_id"]),
        agent=agent.name,
        kind=kind,
        tool_name=ask.get("tool_name"),
        summary=summary_of(kind, ask.get("question"), ask.get("tool_input"), ask.get("summary")),
        outcome=reason,
        actor_kind=actor_kind,
        actor=actor,
        channel="system",
        device=None,
        reason=refused.message,
    )


P = ParamSpec("P")


def audited(
    open_request: Callable[P, Awaitable[Opened | Duplicate]],
) -> Callable[P, Awaitable[Opened | Duplicate | Refused]]:
    """create_request, recorded: a request decided at once gets its row; an
    answer without a request (ANSWERED_WITHOUT_REQUEST) gets its row and comes
    back as `Refused`, for the route to answer with after the commit (raised
    here, the transaction and its row would roll back). Called as
    create_request(s, agent, **keywords)."""

    @functools.wraps(open_request)
    async def open_and_record(*args: P.args, **kwargs: P.kwargs) -> Opened | Duplicate | Refused:
        s, agent = cast(AsyncSession, args[0]), cast(Principal, args[1])
        try:
            result = await open_request(*args, **kwargs)
        except Conflict as refused:
            if refused.extra.get("reason") not in ANSWERED_WITHOUT_REQUEST:
                raise
            await record_refused(s, agent, dict(kwargs), refused)
            return Refused(refused)
        if isinstance(result, Opened):
            await record_opened(s, result.request)
        return result

    return open_and_record


# -- reading the trail ----------------------------------------------------------------------

_NAMED = {"rule": "id", "grant": "id", "person": "name", "terminal": "name", "mode": "name"}


def audit_out(row: AuditRow, *, sees_input: bool) -> AuditOut:
    """The wire form; `sees_input`: the reader decides in the row's session."""
    actor: dict[str, Any] = {"kind": row.actor_kind, "channel": row.channel, "device": row.device}
    if row.actor is not None:
        actor[_NAMED.get(row.actor_kind, "name")] = row.actor
    return AuditOut(
        id=row.id,
        request_id=row.request_id,
        session_id=row.session_id,
        agent=row.agent_name,
        kind=row.kind,
        tool_name=row.tool_name,
        summary=row.summary if sees_input else None,
        outcome=row.outcome,
        decided_by=AuditActor(**actor),
        permission_mode=row.permission_mode,
        enforcement=row.enforcement,
        asked_at=row.asked_at,
        decided_at=row.at,
        waited_ms=row.waited_ms,
        reason=row.reason,
    )


@dataclass(frozen=True)
class Filters:
    """What `page_of` keeps: each set filter must match (all of them)."""

    session_id: str | None = None
    agent: str | None = None
    person: str | None = None  # a person who decided (actor kind person)
    outcome: str | None = None
    since: datetime | None = None


def parse_cursor(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or not 0 < int(value) < 2**63:
        raise invalid_value("cursor", "cursor is not one this server gave out")
    return int(value)


async def page_of(
    s: AsyncSession, who: Principal, filters: Filters, limit: int, cursor: str | None
) -> tuple[list[AuditOut], str | None]:
    """The decisions `who` may see, newest first, `limit` of them after `cursor`.
    Admins see every row; everyone else the rows of the sessions they may read
    (services/access.Reader, the one read rule). The input's summary only for a
    session's deciders. Agents read no audit (the API route is for people)."""
    if filters.outcome is not None and filters.outcome not in OUTCOMES:
        raise invalid_value("outcome", f"unknown outcome; one of: {', '.join(OUTCOMES)}")
    reader = access.Reader(who)
    after = parse_cursor(cursor)
    decides = access.decides(who.name, AuditRow.session_id) if who.is_human else false()
    stmt = select(AuditRow, decides)
    if not reader.sees_all:
        # The sessions one may read as a set, each looked up in
        # ix_audit_decisions_session_id_id: newest-first with the rule tested per
        # row scanned the whole trail for a reader of a few sessions (bench in
        # docs/audit.md).
        stmt = stmt.where(AuditRow.session_id.in_(reader.readable_ids()))
    if filters.session_id is not None:
        stmt = stmt.where(AuditRow.session_id == filters.session_id)
    if filters.agent is not None:
        stmt = stmt.where(AuditRow.agent_name == filters.agent)
    if filters.person is not None:
        stmt = stmt.where(AuditRow.actor_kind == "person", AuditRow.actor == filters.person)
    if filters.outcome is not None:
        stmt = stmt.where(AuditRow.outcome == filters.outcome)
    if filters.since is not None:
        stmt = stmt.where(AuditRow.at >= filters.since)
    if after is not None:
        stmt = stmt.where(AuditRow.id < after)
    rows = (await s.execute(stmt.order_by(AuditRow.id.desc()).limit(limit + 1))).all()
    items = [audit_out(row, sees_input=bool(sees)) for row, sees in rows[:limit]]
    more = len(rows) > limit
    return items, str(items[-1].id) if more else None
