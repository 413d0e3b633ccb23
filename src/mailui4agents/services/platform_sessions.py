"""The mirror of agent platforms' own sessions, reported in bridge heartbeats
(docs/behaviour.md#adoption-of-platform-sessions). They appear in address completion and can be
adopted by mail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PlatformSessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.times import parse_rfc3339


class PlatformSessionIn(BaseModel):
    """One reported session; unknown keys are ignored (the heartbeat is lenient)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    platform_id: str = Field(min_length=1, max_length=500)
    slug: str | None = Field(default=None, max_length=200)
    title: str | None = None
    cwd: str = ""
    updated_at: str | None = None


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = parse_rfc3339(text)
    except ValueError:
        return None
    return value if value.tzinfo else None


async def sync(s: AsyncSession, agent: str, reported: list[PlatformSessionIn]) -> None:
    """Make the mirror equal what the agent reports. Adopted entries stay (their
    binding must survive the platform forgetting the session)."""
    existing = {
        r.platform_id: r
        for r in (
            await s.scalars(
                select(PlatformSessionRow).where(PlatformSessionRow.agent_name == agent)
            )
        ).all()
    }
    now = utcnow()
    seen = set()
    for item in reported:
        seen.add(item.platform_id)
        row = existing.get(item.platform_id)
        if row is None:
            row = PlatformSessionRow(agent_name=agent, platform_id=item.platform_id)
            s.add(row)
        row.slug, row.title, row.cwd = item.slug, item.title, item.cwd
        row.updated_at, row.seen_at = _when(item.updated_at), now
    gone = [pid for pid, r in existing.items() if pid not in seen and r.adopted_session_id is None]
    if gone:
        await s.execute(
            delete(PlatformSessionRow).where(
                PlatformSessionRow.agent_name == agent, PlatformSessionRow.platform_id.in_(gone)
            )
        )
    await s.flush()


def as_dicts(items: list[dict[str, Any]]) -> list[PlatformSessionIn]:
    return [PlatformSessionIn.model_validate(i) for i in items]
