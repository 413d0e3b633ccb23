"""SSE streams. The database log is the truth: a stream replays it from the
client's Last-Event-ID (or starts at "now" on a fresh connection), then takes
new rows from the hub, which reads the log once per commit for every open stream
(events/hub.py). Replays survive gateway restarts.

A token is re-checked when a revocation of its principal says so, on a timer
(settings.sse_token_recheck_s), and the stream ends at the token's expiry; never
per event."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy.ext.asyncio import AsyncSession
from sse_starlette import EventSourceResponse, ServerSentEvent

from mailui4agents.api.deps import Agent, GatewayDep, Human
from mailui4agents.domain.errors import invalid_value
from mailui4agents.events import log
from mailui4agents.events.hub import sse_frame
from mailui4agents.services import identity
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import EventFrame, ResetEvent, to_json

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


async def _valid_until(gw: Gateway, token: str) -> tuple[bool, datetime | None]:
    """Whether the token still works, and until when (None: until revoked)."""
    async with gw.read() as s:
        found = await identity.authenticate_until(s, token)
    return (False, None) if found is None else (True, found[1])


async def _stream(
    gw: Gateway,
    who: Principal,
    token: str,
    after: int,
    until: datetime | None,
    reset: ResetEvent | None,
) -> AsyncIterator[ServerSentEvent | bytes]:
    # Subscribed here, not in _open: a generator that never starts would never
    # unsubscribe. Nothing is lost: the first pass replays the log from `after`
    # (fixed before the 200) after subscribing.
    sub = await gw.hub.subscribe(who.key)
    try:
        # Tells the client the stream is open, so it may now post a request whose
        # answer it must not miss (approval round trips open the stream first). The
        # id (no data, so no event is dispatched) is the stream's start position: a
        # client that reconnects before any event resumes from here, losing nothing.
        yield ServerSentEvent(comment="connected", id=str(after))
        if reset is not None:
            # The client's Last-Event-ID is ahead of the log (a restore from backup):
            # events it would wait for may never come; it must catch up through the
            # inbox and resume from the id given here (docs/design.md, "Events").
            yield sse_frame(after, EventType.RESET, to_json(reset))
        recheck_every = gw.settings.sse_token_recheck_s
        sub.until, sub.next_check = until, time.monotonic() + recheck_every
        while True:
            if sub.reread:  # on open, and when the hub says the queue was dropped
                sub.reread = False
                sub.rows.clear()
                while True:
                    async with gw.read() as s:
                        rows = await log.since(s, sub.principal, after, gw.settings.sse_batch)
                    if rows:
                        after = rows[-1].id
                        yield b"".join(sse_frame(r.id, r.type, r.data) for r in rows)
                    if len(rows) < gw.settings.sse_batch:
                        break
            if sub.rows and not sub.reread:
                # Everything queued goes out as one chunk of frames encoded once
                # for all streams; the replay may have sent some already.
                fresh = [live for live in sub.rows if live.id > after]
                sub.rows.clear()
                if fresh:
                    after = fresh[-1].id
                    yield b"".join(live.frame for live in fresh)
            if sub.reread:
                continue
            if sub.recheck:  # a revocation, the hub's clock (timer or expiry)
                sub.recheck = False
                valid, sub.until = await _valid_until(gw, token)
                sub.next_check = time.monotonic() + recheck_every
                if not valid:
                    return  # revoked or expired: a reconnect gets 401
                continue
            sub.wake.clear()
            if not (sub.rows or sub.reread or sub.recheck):
                await sub.wake.wait()  # no timer per stream: the hub's clock wakes it
    finally:
        gw.hub.unsubscribe(sub)


async def head_id(s: AsyncSession) -> int:
    """The newest event id: a page rendered now resumes its stream from here."""
    return await log.last_id(s)


async def open_stream(
    request: Request, gw: Gateway, who: Principal, token: str
) -> EventSourceResponse:
    """The stream of `who`, authenticated by `token` (the web UI's cookie)."""
    return await _open(request, gw, who, token)


async def _open(
    request: Request, gw: Gateway, who: Principal, token: str | None = None
) -> EventSourceResponse:
    after = _last_event_id(request)
    if token is None:
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
    async with gw.read() as s:
        head = await log.last_id(s)
        found = await identity.authenticate_until(s, token)
    until = None if found is None else found[1]
    reset: ResetEvent | None = None
    if after is None:
        after = head  # a fresh connection starts at "now"; clients catch up via the inbox
    elif after > head:
        reset = ResetEvent(reason="ahead_of_log", last_event_id=after, head=head)
        after = head
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return EventSourceResponse(
        _stream(gw, who, token, after, until, reset),
        ping=gw.settings.sse_ping_s,
        headers=headers,
    )


# What a stream carries, for the OpenAPI document: frames whose `data` is one of
# the event models (docs/api.md, "Events").
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "model": EventFrame,
        "description": "Server-sent events: `id`, `event` (EventType) and `data` (JSON) lines",
    }
}


@router.get("/agent/events", response_class=EventSourceResponse, responses=STREAM)
async def agent_events(request: Request, who: Agent, gw: GatewayDep) -> EventSourceResponse:
    return await _open(request, gw, who)


@router.get("/events", response_class=EventSourceResponse, responses=STREAM)
async def human_events(request: Request, who: Human, gw: GatewayDep) -> EventSourceResponse:
    return await _open(request, gw, who)
