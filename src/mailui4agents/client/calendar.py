"""Calendar calls of the client (docs/api.md, "Calendar"): schedule mail, list,
read, edit and cancel entries. People and agents use the same calls; the path
follows the kind of credential, as every other call of the client does."""

from __future__ import annotations

from typing import Any

from mailui4agents.client.client import AsyncClient
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.wire.calendar import CalendarEntryOut
from mailui4agents.wire.models import Page


def _without_none(**values: Any) -> JsonObject:
    return {k: v for k, v in values.items() if v is not None}


class Calendar:
    """`Calendar(client).schedule(...)` and friends."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    @property
    def _path(self) -> str:
        return "/agent/calendar" if self.client.config.is_agent else "/calendar"

    async def schedule(
        self,
        to: list[str],
        subject: str,
        body: str,
        start_at: str,
        *,
        timezone: str | None = None,
        rrule: str | None = None,
        cc: list[str] | None = None,
        attachment_ids: list[str] | None = None,
        permission_mode: str | None = None,
        from_session_id: str | None = None,
    ) -> CalendarEntryOut:
        payload = _without_none(
            to=to,
            cc=cc,
            subject=subject,
            body=body,
            start_at=start_at,
            timezone=timezone,
            rrule=rrule,
            attachment_ids=attachment_ids,
            permission_mode=permission_mode,
            from_session_id=from_session_id,
        )
        data = await self.client._call("POST", self._path, json=payload)
        return CalendarEntryOut.model_validate(data)

    async def list(
        self, status: str | None = None, everyone: bool = False, limit: int = 50
    ) -> Page[CalendarEntryOut]:
        params = _without_none(status=status, everyone=everyone or None, limit=limit)
        return await self.client._page(self._path, params, CalendarEntryOut)

    async def get(self, entry_id: str) -> CalendarEntryOut:
        data = await self.client._call("GET", f"{self._path}/{entry_id}")
        return CalendarEntryOut.model_validate(data)

    async def update(self, entry_id: str, **fields: Any) -> CalendarEntryOut:
        """Only the fields given change (`rrule=None` given explicitly clears it)."""
        data = await self.client._call("PATCH", f"{self._path}/{entry_id}", json=fields)
        return CalendarEntryOut.model_validate(data)

    async def cancel(self, entry_id: str) -> CalendarEntryOut:
        data = await self.client._call("POST", f"{self._path}/{entry_id}/cancel")
        return CalendarEntryOut.model_validate(data)
