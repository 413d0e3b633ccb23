"""Deciding a permission request or answering a question, once, by a decider of its
session (docs/behaviour.md#approval-round-trip, docs/access.md): one query reads the
request, its session, membership and deciders; one conditional UPDATE settles it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from mailui4agents.db.base import new_id
from mailui4agents.db.tables import GrantRow, PermissionRow, SessionDeciderRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import invalid_value, not_found
from mailui4agents.domain.grants import new_grant
from mailui4agents.services import access, audit, permissions, push
from mailui4agents.services.principals import Principal
from mailui4agents.wire.models import PermissionOut

_PERMISSIONS = cast(Table, PermissionRow.__table__)


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


_OTHER = aliased(PermissionRow)


@cache
def _deciding(shape: access.ReadShape) -> Select[Any]:
    """The request, its session, whether the human may read that session (the
    read rule, access.may_read_sql), whether a pending request of the session is
    past its deadline, whether it was pushed to a device (then its notifications
    are withdrawn: services/push.py), and the session's deciders (one row each,
    access.with_deciders): one query, built once per reader shape."""
    stmt = (
        select(
            PermissionRow,
            SessionRow,
            access.may_read_sql(shape, SessionRow.id),
            select(_OTHER.id)
            .where(
                _OTHER.session_id == PermissionRow.session_id,
                _OTHER.status == "pending",
                _OTHER.expires_at <= bindparam("b_now"),
            )
            .exists(),
            push.was_pushed(PermissionRow.id),
            SessionDeciderRow.name,
        )
        .join(SessionRow, SessionRow.id == PermissionRow.session_id)
        .where(PermissionRow.id == bindparam("b_id"))
    )
    return access.with_deciders(stmt, SessionRow.id)


_SETTLE = (
    update(_PERMISSIONS)
    .where(_PERMISSIONS.c.id == bindparam("b_id"), _PERMISSIONS.c.status == "pending")
    .values(
        status=bindparam("b_status"),
        decision=bindparam("b_decision"),
        note=bindparam("b_note"),
        answers=bindparam("b_answers"),
        decided_by=bindparam("b_decided_by"),
        decided_at=bindparam("b_decided_at"),
        grant_id=bindparam("b_grant_id"),
        decided_channel=bindparam("b_decided_channel"),
        decided_device=bindparam("b_decided_device"),
    )
)
_INSERT_GRANT = insert(cast(Table, GrantRow.__table__))


@dataclass(frozen=True, slots=True)
class Choice:
    """What a decider chose: approve or deny, a note for the agent, with
    `always` a standing grant (its pattern), a question's answers; and where
    from: `channel` (web, api, cli, push…) and the paired `device`, if any
    (docs/remote.md, "First answer wins"). The API's body, the web UI's form
    and a notification's action all come to this."""

    decision: str
    note: str | None = None
    always: bool = False
    grant_pattern: str | None = None
    answers: list[str] | None = None
    channel: str = "api"
    device: str | None = None


async def decide(
    s: AsyncSession, human: Principal, request_id: str, choice: Choice
) -> PermissionOut:
    """A decider of the request's session approves or denies it (once)."""
    decision, note, always = choice.decision, choice.note, choice.always
    grant_pattern, answers = choice.grant_pattern, choice.answers
    what = f"permission request '{request_id}'"
    now = utcnow()
    reader = access.Reader(human)
    params = {"b_id": request_id, "b_now": now, **reader.sql_params()}
    found = (await s.execute(_deciding(reader.shape), params)).all()
    if not found:
        raise not_found(what)
    row, session, readable, due = found[0][0], found[0][1], bool(found[0][2]), bool(found[0][3])
    pushed = bool(found[0][4])
    deciders = [name for *_, name in found if name is not None]
    reader.ensure_decide_known(readable, deciders, what)
    if due:  # expire what is past its deadline first (this request too, maybe)
        await permissions.expire_due(s, row.session_id)
    if row.status != "pending":
        raise permissions.already_decided(row, now)
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
        # Without a pattern the grant covers the approved input only; `*` every
        # input (docs/behaviour.md#grants).
        rule = new_grant(str(row.tool_name), row.tool_input or {}, grant_pattern)
        if rule is None:
            raise invalid_value(
                "grant_pattern",
                f"this {row.tool_name} call names no single command or absolute path to "
                "allow again: give a pattern (a prefix, or * for every input)",
            )
        # Before the request's UPDATE, which then names it; a request decided
        # meanwhile fails that UPDATE and the whole transaction, grant included.
        grant_id = new_id()
        await s.execute(
            _INSERT_GRANT,
            {
                "id": grant_id,
                "session_id": row.session_id,
                "tool_name": str(row.tool_name),
                "pattern": rule.pattern,
                "scope": rule.scope,
                "created_by": human.name,
                "request_id": row.id,
                "created_at": now,
                "revoked_at": None,
            },
        )
    # What the UPDATE writes (each column as b_<column>) and the row then shows.
    settled = {
        "status": "approved" if decision == "approve" else "denied",
        "decision": decision,
        "note": note,
        "answers": checked,
        "decided_by": human.name,
        "decided_at": now,
        "grant_id": grant_id,
        "decided_channel": choice.channel,
        "decided_device": choice.device,
    }
    result = await s.execute(
        _SETTLE, {"b_id": row.id, **{f"b_{key}": value for key, value in settled.items()}}
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        # Someone else's decision committed since our read: say whose.
        await s.refresh(row)
        raise permissions.already_decided(row)
    permissions.settled(row, **settled)
    await audit.record_settled(s, row, actor_kind="person", actor=human.name)
    await permissions.announce(
        s, session, row, sender=human.name, sender_human=True, deciders=deciders
    )
    if pushed:
        await push.queue_settled(s, row)
    return permissions.permission_out(row, session)
