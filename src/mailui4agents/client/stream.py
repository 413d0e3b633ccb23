"""The reconnecting SSE loop behind :meth:`AsyncClient.events`.

Guarantees: events come out in order, none is lost across reconnects (the last
seen id goes back as ``Last-Event-ID``) and none is repeated (ids at or below the
newest one already yielded are dropped). Permanent refusals (401 revoked key,
403 wrong agent) end the loop at once; everything else is retried with backoff.

A ``reset`` event (type :data:`RESET`) says the cursor was ahead of the gateway's
log (a gateway restored from a backup): events may have been lost, so the caller
should catch up through the inbox. The loop moves its cursor back to the reset's
id, so the events that follow (with ids below the old cursor) are not dropped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping

import anyio
import httpx

from mailui4agents.client.backoff import Backoff
from mailui4agents.client.errors import ApiError, GatewayUnreachable, not_an_event_stream
from mailui4agents.client.models import Event
from mailui4agents.client.sse import Cursor, SSEParser, stream_headers
from mailui4agents.wire.events import EventType

logger = logging.getLogger(__name__)

#: Called before each wait: the failure (None for a stream that simply ended) and the delay.
RetryCallback = Callable[[ApiError | None, float], None]

#: The type of the event that tells the caller to catch up through the inbox.
RESET = EventType.RESET

# The gateway pings every 15 s, so a read that waits 45 s has met a dead connection.
STREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=45.0, write=10.0, pool=10.0)


async def iter_events(
    http: httpx.AsyncClient,
    path: str,
    *,
    headers: Mapping[str, str],
    last_event_id: str | None,
    backoff: Backoff,
    on_retry: RetryCallback | None = None,
    on_connect: Callable[[], None] | None = None,
) -> AsyncGenerator[Event, None]:
    """Yield the events of the stream at ``path`` forever, reconnecting as needed."""
    cursor = Cursor(last_event_id)
    while True:
        failure: ApiError | None = None
        connected = False
        try:
            async with http.stream(
                "GET", path, headers={**headers, **stream_headers(cursor.resume)},
                timeout=STREAM_TIMEOUT,
            ) as response:  # fmt: skip
                if response.status_code != 200:
                    await response.aread()
                    failure = ApiError.from_response(response)
                    if failure.permanent:
                        raise failure
                else:
                    refused = not_an_event_stream(
                        response.status_code, response.url, response.headers.get("content-type", "")
                    )
                    if refused is not None:
                        raise refused
                    connected = True
                    if on_connect is not None:
                        # The gateway fixed this stream's start before answering 200:
                        # anything committed from now on will be delivered.
                        on_connect()
                    parser = SSEParser()
                    async for chunk in response.aiter_bytes():
                        backoff.reset()  # the connection works; start over next time
                        for sse in parser.feed(chunk):
                            accepted = cursor.accept(sse)
                            if accepted is not None:
                                event_id, event_type, data = accepted
                                yield Event(id=event_id, type=event_type, data=data)
                        cursor.moved(parser)
                        backoff.follow(parser.retry)
        except httpx.TransportError as exc:
            failure = GatewayUnreachable(str(http.base_url), exc, connected=connected)
        delay = backoff.next_delay()
        if failure is not None and failure.retry_after is not None:
            delay = max(delay, failure.retry_after)
        logger.info("event stream %s ended (%s); reconnecting in %.2f s", path, failure, delay)
        if on_retry is not None:
            on_retry(failure, delay)
        await anyio.sleep(delay)
