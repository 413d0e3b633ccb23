"""Incremental parser for ``text/event-stream`` (WHATWG HTML, "server-sent events").

The parser keeps its state across reads, so a frame may arrive split at any byte:
inside a UTF-8 character, between an event name and its data (a bug once dropped
exactly that case), or between the CR and LF of one CRLF line end.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    ``id`` is the last event id in effect when the event was dispatched (ids
    persist until changed; ``None`` when none was ever set or it was cleared).
    ``retry`` is the reconnection time in milliseconds given in this event's own
    lines, if any.
    """

    id: str | None
    event: str
    data: str
    retry: int | None = None


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
