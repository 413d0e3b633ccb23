"""Agent use cases: the heartbeat, and the mail session of an interactive
platform session (docs/behaviour.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import AgentRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.aliases import auto_alias
from mailui4agents.domain.errors import invalid_value
from mailui4agents.domain.mail_types import MailType, Recipient
from mailui4agents.domain.modes import normalise_enforcement
from mailui4agents.services import (
    access,
    delivery,
    identity,
    platform_sessions,
    sessions,
    tasking,
)
from mailui4agents.services.platform_sessions import PlatformSessionIn
from mailui4agents.services.principals import Principal
from mailui4agents.settings import Settings
from mailui4agents.wire.models import JsonObject


@dataclass(frozen=True)
class Heartbeat:
    """A parsed heartbeat: None means "not reported" (the field keeps its value).
    `raw` is stored whole; `mode_reported` tells an absent mode_enforcement from
    one reported as null (which normalises to advisory)."""

    raw: JsonObject
    status: str | None = None
    platform: str | None = None
    version: str | None = None
    mode_enforcement: Any = None
    mode_reported: bool = False
    workspaces: list[str] | None = None
    platform_sessions: list[PlatformSessionIn] | None = None


async def heartbeat(s: AsyncSession, agent: Principal, hb: Heartbeat) -> str:
    """Record what the agent reports; returns its enforcement level now. A new
    level updates its active sessions and tells their participants."""
    row = await s.scalar(select(AgentRow).where(AgentRow.id == agent.id))
    assert row is not None  # the caller was authenticated as this agent
    if hb.status is not None:
        row.status = hb.status
    if hb.platform is not None:
        row.platform = hb.platform
    if hb.version is not None:
        row.version = hb.version
    if hb.mode_reported:
        level = normalise_enforcement(hb.mode_enforcement)
        if level != row.mode_enforcement:
            row.mode_enforcement = level
            await sessions.refresh_enforcement(s, agent.name, level)
    if hb.workspaces is not None:
        row.workspaces = hb.workspaces
    if hb.platform_sessions is not None:
        await platform_sessions.sync(s, agent.name, hb.platform_sessions)
    row.heartbeat = hb.raw
    row.last_seen_at = utcnow()
    return row.mode_enforcement


async def interactive_session(
    s: AsyncSession,
    settings: Settings,
    agent: Principal,
    *,
    platform_id: str,
    owner: str,
    cwd: str,
    title: str | None,
) -> SessionRow:
    """The mail session of an interactive platform session: one per platform
    session, created on first use with workspace = the platform's cwd, and a first
    mail to the owner so that the owner is the human who decides. The owner must
    be one of the agent's owners (403 otherwise), checked when the session is made:
    every later hook call of the terminal finds it with one query."""
    found = await s.scalar(
        select(SessionRow).where(
            SessionRow.platform_id == platform_id, SessionRow.created_by == agent.name
        )
    )
    if found is not None:
        return found
    if await identity.kind_of(s, owner) != "user":
        raise invalid_value("owner", f"no user is named '{owner}' (set AGENTMAIL_OWNER)")
    await tasking.check_interactive_owner(s, agent.name, owner)
    label = title or "terminal"
    row = await sessions.create_session(s, settings, agent.name, cwd, auto_alias(agent.name, label))
    row.platform_id = row.platform_id or platform_id
    await delivery.deliver(
        s,
        row,
        sender=agent.name,
        sender_human=False,
        recipients=[Recipient(owner, is_human=True)],
        subject=f"Interactive session: {label}",
        body=(
            f"{agent.name} is working interactively in {cwd or '(no workspace)'}.\n"
            "Its requests to run commands or change files will arrive in this thread."
        ),
        type_=MailType.SYSTEM,
    )
    await access.add_owners(s, row.id, [owner], by=agent.name)
    return row
