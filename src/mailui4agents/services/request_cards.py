"""The requests behind a thread's request mails, for the web UI's cards: two
reads no API route makes (web/data.py renders them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import false, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PermissionRow, SessionDeciderRow
from mailui4agents.services import access, permissions, session_summary
from mailui4agents.services.principals import Principal
from mailui4agents.wire.models import PermissionOut


@dataclass(frozen=True)
class Card:
    """A request mail's request. `request` (None for who does not decide in the
    session): its PermissionOut, with where the first answer came from."""

    kind: str
    request: PermissionOut | None = None
    decided_channel: str | None = None
    decided_device: str | None = None


async def thread_requests(
    s: AsyncSession, who: Principal, session_id: str, mail_ids: Sequence[str]
) -> dict[str, Card]:
    """The requests behind `mail_ids` of session `session_id`, by mail id, in one
    query (none without ids). Who does not decide there reads a request mail
    without its input (docs/behaviour.md#who-sees-a-requests-input, the same
    test as services/request_input.hidden, in the query): only the kind."""
    if not mail_ids:
        return {}
    decides: Any = false()
    if who.is_human:
        decides = (
            select(SessionDeciderRow.name)
            .where(
                SessionDeciderRow.session_id == PermissionRow.session_id,
                SessionDeciderRow.name == who.name,
            )
            .exists()
        )
    stmt = select(PermissionRow, decides).where(
        PermissionRow.session_id == session_id, PermissionRow.mail_id.in_(list(mail_ids))
    )
    out: dict[str, Card] = {}
    for row, sees in (await s.execute(stmt)).all():
        if row.mail_id is None:
            continue
        if not sees:
            out[row.mail_id] = Card(row.kind)
            continue
        out[row.mail_id] = Card(
            row.kind, permissions.permission_out(row), row.decided_channel, row.decided_device
        )
    return out


async def request_kinds(s: AsyncSession, mail_ids: Sequence[str]) -> dict[str, str]:
    """The kind (approval | question) of each request mail among `mail_ids`, by
    mail id, in one query (none without ids). The kind tells nothing of the input."""
    if not mail_ids:
        return {}
    stmt = select(PermissionRow.mail_id, PermissionRow.kind).where(
        PermissionRow.mail_id.in_(list(mail_ids))
    )
    return {str(mail_id): kind for mail_id, kind in (await s.execute(stmt)).all()}


async def kind_for_decider(s: AsyncSession, who: Principal, request_id: str) -> str:
    """The request's kind, for who may decide it: NotFound for who may not read
    its session, Forbidden for a reader without the power — what deciding would
    answer, before the kind could tell anything (docs/access.md)."""
    row = await permissions.get_request(s, request_id)
    found = await session_summary.get_session(s, row.session_id)
    await access.Reader(who).ensure_decide(s, found, f"permission request '{request_id}'")
    return row.kind
