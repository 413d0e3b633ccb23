"""Incremental parser for ``text/event-stream`` (WHATWG HTML, "server-sent events").

The parser keeps its state across reads, so a frame may arrive split at any byte:
inside a UTF-8 character, between an event name and its data (a bug once dropped
exactly that case), or between the CR and LF of one CRLF line end.
"""

from __future__ import annotations

import codecs
import json
import re

from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.values import Value

_LINE_END = re.compile(r"\r\n|\r|\n")
# wire/events.py EventType.RESET (not imported: that package needs pydantic).
RESET = "reset"


class SSEEvent(Value):
    """One dispatched event.

    ``id`` is the last event id in effect when the event was dispatched (ids
    persist until changed; ``None`` when none was ever set or it was cleared).
    ``retry`` is the reconnection time in milliseconds given in this event's own
    lines, if any. (Not a dataclass: the hook's ask path imports this module,
    client/lite.py.)
    """

    __slots__ = ("data", "event", "id", "retry")
    id: str | None
    event: str
    data: str
    retry: int | None

    def __init__(self, id: str | None, event: str, data: str, retry: int | None = None) -> None:
        self._init(id=id, event=event, data=data, retry=retry)


class SSEParser:
    """Turn a byte stream into :class:`SSEEvent` objects; feed it chunks as they arrive."""

    def __init__(self) -> None:
        # "utf-8-sig" drops one BOM at the very start of the stream, even when
        # the BOM itself is split across chunks; later U+FEFF are kept as data.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._buffer = ""
        self._after_cr = False
        self._data: list[str] = []
        self._event_type = ""
        self._id_buffer = ""
        self._block_retry: int | None = None
        #: The last event id, updated at each blank line (also for blocks without data).
        self.last_event_id: str | None = None
        #: The reconnection time in milliseconds most recently sent by the server.
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` and return the events completed by it (possibly none)."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._after_cr and text.startswith("\n"):
            # The LF that completes a CRLF whose CR ended the previous chunk.
            text = text[1:]
        self._after_cr = False
        buffer = self._buffer + text
        events: list[SSEEvent] = []
        position = 0
        while (match := _LINE_END.search(buffer, position)) is not None:
            line = buffer[position : match.start()]
            position = match.end()
            if match.group() == "\r" and position == len(buffer):
                # A CR may be the first half of a CRLF; end the line now (so the
                # event is not held back) and swallow a leading LF next time.
                self._after_cr = True
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        self._buffer = buffer[position:]
        return events

    def _process_line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, e.g. the ": ping" keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event_type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id_buffer = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._block_retry = int(value)
            self.retry = self._block_retry
        # Any other field name is ignored, as the standard requires.
        return None

    def _dispatch(self) -> SSEEvent | None:
        self.last_event_id = self._id_buffer or None
        data, event_type, retry = self._data, self._event_type, self._block_retry
        self._data, self._event_type, self._block_retry = [], "", None
        if not data:
            return None
        return SSEEvent(
            id=self.last_event_id, event=event_type or "message", data="\n".join(data), retry=retry
        )


class Cursor:
    """Which events of a reconnecting stream are new, and where to resume: the
    one bookkeeping of client/stream.py (httpx) and client/lite.py (the hook's
    sockets).

    An event whose id is not above the newest seen is a replay and dropped. A
    ``reset`` (the cursor was ahead of the gateway's log, restored from a backup)
    moves the cursor back to its id, so the events that follow are not dropped.
    """

    def __init__(self, last_event_id: str | None) -> None:
        self.resume = last_event_id
        self.newest = as_int(last_event_id)

    def accept(self, sse: SSEEvent) -> tuple[int | None, str, JsonObject] | None:
        """(id, type, decoded data) of an event to pass on, or None (a ping, a replay)."""
        if sse.event == "ping":
            return None
        event_id = as_int(sse.id)
        if sse.event == RESET:  # the log is behind our cursor: start over from its head
            self.newest = event_id
            self.resume = sse.id or self.resume
            return event_id, sse.event, decode_data(sse.data)
        if event_id is not None and self.newest is not None and event_id <= self.newest:
            return None
        self.newest = event_id if event_id is not None else self.newest
        return event_id, sse.event, decode_data(sse.data)

    def moved(self, parser: SSEParser) -> None:
        """After a chunk: resume from the parser's last event id."""
        self.resume = parser.last_event_id or self.resume


def stream_headers(resume: str | None) -> dict[str, str]:
    """The headers that ask for an event stream, resuming after `resume` if set."""
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if resume:
        headers["Last-Event-ID"] = resume
    return headers


def decode_data(data: str) -> JsonObject:
    """An event's JSON data as an object (``{"raw": ...}`` when it is not JSON)."""
    try:
        value = json.loads(data)
    except json.JSONDecodeError:
        return {"raw": data}
    return value if isinstance(value, dict) else {"value": value}


def as_int(value: str | None) -> int | None:
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)
