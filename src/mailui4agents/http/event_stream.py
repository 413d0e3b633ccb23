"""The SSE response of the event streams (api/events.py for a bearer token, the
web UI's /events for its cookie). The database log is the truth: a stream
replays it from the client's Last-Event-ID (or starts at "now" on a fresh
connection), then takes new rows from the hub, which has them from the commit
itself or reads the log once per commit for every open stream (events/hub.py).
Replays survive gateway restarts.

A token is re-checked when a revocation of its principal says so, on a timer
(settings.sse_token_recheck_s), and the stream ends at the token's expiry; never
per event."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from mailui4agents.db.tables import EventRow
from mailui4agents.domain.errors import invalid_value
from mailui4agents.events import log
from mailui4agents.events.hub import Subscription, sse_frame
from mailui4agents.services import identity
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import ResetEvent, to_json


def last_event_id(request: Request) -> int | None:
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


PING = b": ping\r\n\r\n"


class EventStream(Response):
    """An SSE response that lives in the request's own task, with one helper
    task that waits for the client to leave; keep-alives and token expiry come
    from the hub's clock (events/hub.py). sse-starlette's response ran four tasks
    per stream (body, ping timer, shutdown watcher, disconnect) under a task
    group, most of a held stream's memory (bench/streams.py)."""

    def __init__(
        self,
        gw: Gateway,
        who: Principal,
        token: str,
        until: datetime | _Unknown | None,
        after: int | None,
        status_code: int = 200,  # FastAPI's OpenAPI document reads it from here
    ) -> None:
        self.status_code = status_code
        # Set here, not on the class: the OpenAPI document keeps its shape (api/openapi.py).
        self.media_type = "text/event-stream"
        self.background = None
        self.init_headers(
            {"Cache-Control": "no-store", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
        )
        self._gw, self._who, self._token, self._until, self._after = gw, who, token, until, after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        if scope.get("method") == "HEAD":  # headers only: the stream never starts
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        # Subscribed before anything is read, so nothing committed from here on
        # is missed; unsubscribed in `finally` whatever ends the stream.
        sub = await self._gw.hub.subscribe(self._who.key, reread=False)
        watcher = asyncio.ensure_future(_watch_disconnect(receive, sub))
        try:
            await send(start)
            async for chunk in self._frames(sub):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client left mid-write
            pass
        finally:
            watcher.cancel()
            self._gw.hub.unsubscribe(sub)

    async def _frames(self, sub: Subscription) -> AsyncIterator[bytes]:
        gw, settings = self._gw, self._gw.settings
        head, floor = await self._head_and_until(sub)
        after = self._after
        reset: ResetEvent | None = None
        if after is None:
            # A fresh connection starts at "now" (clients catch up via the inbox):
            # where the hub began handing this stream rows, when that is known. The
            # head read a moment later may already hold a commit made since the
            # subscription (a client that posts once the headers arrive), which
            # starting at the head would skip.
            after = head if sub.covered is None else min(head, sub.covered)
        elif after > head:
            reset = ResetEvent(
                reason="ahead_of_log", last_event_id=after, head=head, message=AHEAD_OF_LOG
            )
            after = head
        elif after < floor:
            # Events between the client's id and the floor were compacted: resuming
            # would skip them in silence (docs/behaviour.md#live-events-sse).
            reset = ResetEvent(
                reason="replay_window_exceeded", last_event_id=after, head=head,
                message=WINDOW_EXCEEDED,
            )  # fmt: skip
            after = head
        # The hub hands this stream every row above `covered`: a stream starting
        # there or later needs no replay of the log (a fresh one never does).
        sub.reread = sub.covered is None or after < sub.covered
        sub.token = self._token
        sub.next_ping = time.monotonic() + settings.sse_ping_s
        # Tells the client the stream is open, so it may now post a request whose
        # answer it must not miss (approval round trips open the stream first). The
        # id (no data, so no event is dispatched) is the stream's start position: a
        # client that reconnects before any event resumes from here, losing nothing.
        yield f": connected\r\nid: {after}\r\n\r\n".encode()
        if reset is not None:
            # The client's Last-Event-ID is ahead of the log (a restore from backup):
            # events it would wait for may never come; it must catch up through the
            # inbox and resume from the id given here (docs/design.md, "Events").
            yield sse_frame(after, EventType.RESET, to_json(reset))
        while not sub.closed:
            if sub.reread:  # when the log is behind the hub, and when the queue was dropped
                sub.reread = False
                sub.rows.clear()
                while True:
                    rows = await _since(gw, sub.principal, after)
                    if rows:
                        after = rows[-1].id
                        yield b"".join(sse_frame(r.id, r.type, r.data) for r in rows)
                    if len(rows) < settings.sse_batch:
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
            if sub.recheck:  # a revocation, a failed shared re-check, the token's expiry
                sub.recheck = False
                valid, sub.until = await _valid_until(gw, self._token)
                if not valid:
                    return  # revoked or expired: a reconnect gets 401
                continue
            if sub.ping:
                sub.ping = False
                yield PING
            sub.wake.clear()
            if not (sub.rows or sub.reread or sub.recheck or sub.ping or sub.closed):
                await sub.wake.wait()  # no timer per stream: the hub's clock wakes it

    async def _head_and_until(self, sub: Subscription) -> tuple[int, int]:
        """The log's head and, for a stream that resumes, its compacted floor."""
        # Not inline in _frames: a held stream's frame would keep the closed session.
        async with self._gw.read() as s:
            if isinstance(self._until, _Unknown):
                found = await identity.authenticate_until(s, self._token)
                sub.until = None if found is None else found[1]
            else:
                sub.until = self._until
            head = await log.last_id(s)
            return head, (0 if self._after is None else await log.floor(s))


AHEAD_OF_LOG = "the position is ahead of the log (a restored backup?): catch up from the inbox"
WINDOW_EXCEEDED = "replay window exceeded: catch up from the inbox"


async def _since(gw: Gateway, principal: str, after: int) -> list[EventRow]:
    async with gw.read() as s:
        return await log.since(s, principal, after, gw.settings.sse_batch)


class _Unknown:
    """The token's end is not known yet (the stream looks it up)."""


UNKNOWN = _Unknown()


async def _watch_disconnect(receive: Receive, sub: Subscription) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    sub.closed = True
    sub.wake.set()


async def head_id(gw: Gateway) -> int:
    """The newest event id: a page rendered now resumes its stream from here."""
    async with gw.read() as s:
        return await log.last_id(s)


def open_stream(
    request: Request,
    gw: Gateway,
    who: Principal,
    token: str,
    until: datetime | _Unknown | None = UNKNOWN,
) -> EventStream:
    """The stream of `who`, authenticated by `token`, from the request's
    Last-Event-ID. `until`: the token's end when the caller just looked it up
    (else the stream looks it up)."""
    return EventStream(gw, who, token, until, last_event_id(request))
