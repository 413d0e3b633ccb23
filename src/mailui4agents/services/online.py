"""Who is online: an open event stream, or for an agent a heartbeat in the last
two minutes. The one rule behind the web UI's contacts page (web/data.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.types import utcnow
from mailui4agents.services import agent_accounts
from mailui4agents.services.principals import Principal, principal_key
from mailui4agents.wire.models import ContactOut
from mailui4agents.wire.online import AgentStatusOut

ONLINE_HEARTBEAT = timedelta(seconds=120)

Connected = Callable[[str], int]  # an event-log key's open streams (events/hub.EventHub)


def agent_online(streams: int, last_seen_at: datetime | None, now: datetime) -> bool:
    """An open stream, or a heartbeat within ONLINE_HEARTBEAT of `now`."""
    return streams > 0 or (last_seen_at is not None and now - last_seen_at < ONLINE_HEARTBEAT)


def contact_online(contact: ContactOut, connected: Connected) -> bool:
    """A contact (services/discovery.contacts) has an open event stream."""
    return connected(principal_key(contact.name, contact.kind == "human")) > 0


async def agents_status(
    s: AsyncSession, who: Principal, connected: Connected
) -> list[AgentStatusOut]:
    """Every agent's name and enforcement; for admins and the agent's owners
    also its platform, version, last heartbeat, streams and whether it is
    online (`details`). No keys.

    Why only they: what runs where, in which version, and when it last
    answered is what someone probing the agents wants to know first."""
    now = utcnow()
    out = []
    for a in await agent_accounts.list_agents(s, connected):
        if not (who.is_admin or who.name in a.owners):
            out.append(AgentStatusOut(name=a.name, mode_enforcement=a.mode_enforcement))
            continue
        out.append(
            AgentStatusOut(
                name=a.name,
                mode_enforcement=a.mode_enforcement,
                details=True,
                platform=a.platform,
                version=a.version,
                last_seen_at=a.last_seen_at,
                streams=a.connected_streams,
                online=agent_online(a.connected_streams, a.last_seen_at, now),
                sandbox=a.sandbox,
            )
        )
    return out
