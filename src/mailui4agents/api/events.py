"""SSE streams. The database log is the truth: a stream reads it from the client's
Last-Event-ID (or from "now" on a fresh connection) and sleeps until the hub says
its owner has something new. Replays survive gateway restarts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.errors import invalid_value
from mailui4agents.events import log
from mailui4agents.services import identity
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway

router = APIRouter(prefix="/api/v1", tags=["events"])


def _last_event_id(request: Request) -> int | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid_value("Last-Event-ID", "Last-Event-ID must be an event id") from None
    if not 0 <= value < 2**63:  # an event id; larger ones broke the stream after its 200
        raise invalid_value("Last-Event-ID", "Last-Event-ID must be an event id")
    return value


async def _still_valid(gw: Gateway, token: str) -> bool:
    async with gw.read() as s:
        return await identity.authenticate(s, token) is not None


async def _stream(
    gw: Gateway, who: Principal, token: str, after: int
) -> AsyncIterator[ServerSentEvent]:
    key = who.key
    with gw.hub.subscribe(key) as wake:
        # Tells the client the stream is open, so it may now post a request whose
        # answer it must not miss (approval round trips open the stream first). The
        # id (no data, so no event is dispatched) is the stream's start position: a
        # client that reconnects before any event resumes from here, losing nothing.
        yield ServerSentEvent(comment="connected", id=str(after))
        while True:
            wake.clear()  # before reading: a commit after this point wakes us again
            async with gw.read() as s:
                rows = await log.since(s, key, after, gw.settings.sse_batch)
            for row in rows:
                after = row.id
                yield ServerSentEvent(
                    data=json.dumps(row.data, ensure_ascii=False),
                    event=row.type,
                    id=str(row.id),
                )
            if len(rows) < gw.settings.sse_batch:
                # Wake on news, or at least every ping interval, and re-check the
                # token: a revoked key must stop receiving at once, not at reconnect.
                with anyio.move_on_after(gw.settings.sse_ping_s):
                    await wake.wait()
                if not await _still_valid(gw, token):
                    return


async def _open(request: Request, gw: Gateway, who: Principal) -> EventSourceResponse:
    after = _last_event_id(request)
    if after is None:
        # A fresh connection starts at "now"; clients catch up through the inbox.
        async with gw.read() as s:
            after = await log.last_id(s)
    headers: dict[str, Any] = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    return EventSourceResponse(
        _stream(gw, who, token, after), ping=gw.settings.sse_ping_s, headers=headers
    )


@router.get("/agent/events", response_class=EventSourceResponse)
async def agent_events(request: Request, who: Agent, gw: GatewayDep) -> EventSourceResponse:
    return await _open(request, gw, who)


@router.get("/events", response_class=EventSourceResponse)
async def human_events(request: Request, who: Human, gw: GatewayDep) -> EventSourceResponse:
    return await _open(request, gw, who)
