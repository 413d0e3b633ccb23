"""Deciding requests from an adapter: what awaits a decider (`requests_for`), and
`decide`: the content limits, where the answer came from, then
services/permission_decisions.decide. The API routes (api/permissions.py) and
the web UI (web/data.py) both call these."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.services import devices, permission_decisions, permissions, size_limits
from mailui4agents.services.permission_decisions import Choice
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import PermissionOut


async def decide(
    gw: Gateway, who: Principal, request_id: str, choice: Choice, *, web_token: str | None = None
) -> PermissionOut:
    """Decide once (409 `already_decided` after someone else did). `web_token`:
    the web session's token the decision came with; when it is a paired
    device's, the decision records that device's name as `decided_device`, as a
    push action records the pushed device (docs/remote.md, "First answer wins")."""
    size_limits.check_decision(gw.settings, choice.note, choice.grant_pattern, choice.answers)
    async with gw.write(inline=True) as s:
        if web_token is not None and choice.device is None:
            device = await devices.this_device(s, web_token)
            if device is not None:
                choice = replace(choice, device=device.name)
        return await permission_decisions.decide(s, who, request_id, choice)


async def requests_for(
    s: AsyncSession, who: Principal, status: str | None, session_id: str | None, limit: int
) -> list[PermissionOut]:
    """The requests `who` may decide (deciders only, admins included:
    docs/access.md), newest first; what is past its deadline expires first, so
    nothing shows as pending that no longer is."""
    await permissions.expire_due(s, session_id)
    return await permissions.list_for_human(s, who, status, session_id, limit)
