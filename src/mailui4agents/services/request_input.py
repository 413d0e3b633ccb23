"""Who sees what an agent asked for (docs/behaviour.md#who-sees-a-requests-input).

A `permission_request` mail holds the request's input: the command, the file
content, the question. It is sent to the session's deciders, but a thread, a
search hit or a forward shows it to whoever reads the session: participants who
are not deciders (a person cc'd in), admins (who read every session) and other
agents in it. They see that a request was made, by which agent, for which tool
and how it was decided — never its input. The session's deciders see it, and so
does the agent that asked (it sent that input itself).

`hidden` answers for a page of mail (services/reading.page_of, so the inbox,
one mail, a thread and search), `visible` is the same rule as SQL (search
matches no hidden input: a hit would tell the input's words).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailRow, PermissionRow
from mailui4agents.domain.mail_types import MailType
from mailui4agents.services import access
from mailui4agents.services.principals import Principal

REQUEST_MAIL = MailType.PERMISSION_REQUEST


@dataclass(frozen=True, slots=True)
class MailHead:
    """What the rule reads of a mail: its id, session, type and sender."""

    mail_id: str
    session_id: str
    type: str
    from_name: str
    from_human: bool


@dataclass(frozen=True, slots=True)
class Shown:
    """A request mail as a reader without its input sees it."""

    subject: str
    body: str


def _asked_it(reader: Principal, mail: MailHead) -> bool:
    return reader.kind == "agent" and not mail.from_human and mail.from_name == reader.name


def visible(reader: Principal) -> ColumnElement[bool]:
    """A test of a MailRow: not a request mail whose input `reader` may not see."""
    sees: ColumnElement[bool] = false()
    if reader.is_human:
        sees = access.decides(reader.name, MailRow.session_id)
    elif reader.kind == "agent":
        sees = and_(MailRow.from_name == reader.name, MailRow.from_human.is_(False))
    return or_(MailRow.type != REQUEST_MAIL, sees)


def _outcome(status: str, decided_by: str | None) -> str:
    if status == "pending":
        return "It waits for a decider."
    by = f" by {decided_by}" if decided_by and decided_by != "system" else ""
    return f"It was {status}{by}."


def _shown(agent: str, kind: str, tool: str | None, status: str, by: str | None) -> Shown:
    if kind == "question":
        subject, asked = "Question", f"{agent} asked the session's deciders a question."
    else:
        subject = f"Approval needed: {tool}"
        asked = f"{agent} asked the session's deciders to use {tool}."
    body = f"{asked} {_outcome(status, by)}\n\nOnly the session's deciders see what it asked for."
    return Shown(subject, body)


UNKNOWN = Shown(
    "Approval needed", "A permission request. Only the session's deciders see what it asked for."
)


async def hidden(s: AsyncSession, reader: Principal, mails: Iterable[MailHead]) -> dict[str, Shown]:
    """For each request mail among `mails` whose input `reader` may not see,
    what it sees instead, by mail id. No query when there is no such mail (a
    page without request mails, or the asking agent's own)."""
    asked = [m for m in mails if m.type == REQUEST_MAIL and not _asked_it(reader, m)]
    if not asked:
        return {}
    decides: Any = false()
    if reader.is_human:
        decides = access.decides(reader.name, PermissionRow.session_id)
    rows = await s.execute(
        select(
            PermissionRow.mail_id,
            PermissionRow.agent_name,
            PermissionRow.kind,
            PermissionRow.tool_name,
            PermissionRow.status,
            PermissionRow.decided_by,
            decides,
        ).where(PermissionRow.mail_id.in_({m.mail_id for m in asked}))
    )
    out = {m.mail_id: UNKNOWN for m in asked}  # no request row: hidden all the same
    for mail_id, agent, kind, tool, status, by, sees in rows:
        if sees:
            del out[mail_id]
        else:
            out[mail_id] = _shown(agent, kind, tool, status, by)
    return out
