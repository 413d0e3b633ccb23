"""A small SSE reader for tests: raw httpx + the client's parser, with deadlines."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from mailui4agents.client.sse import SSEParser


@dataclass
class Got:
    id: int
    type: str
    data: dict[str, Any]


async def collect(
    http: httpx.AsyncClient,
    path: str,
    token: str,
    *,
    until: Callable[[list[Got]], bool],
    last_event_id: int | None = None,
    deadline: float = 30.0,
    on_open: Callable[[], Any] | None = None,
) -> list[Got]:
    """Read events until `until(events)` holds; fail after `deadline` seconds.

    `on_open` (sync or async) runs once the stream is open, before any event is
    awaited — the place to send the mail whose event the test waits for."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    got: list[Got] = []
    parser = SSEParser()
    with anyio.fail_after(deadline):
        async with http.stream("GET", path, headers=headers, timeout=None) as r:
            assert r.status_code == 200, await r.aread()
            if on_open is not None:
                result = on_open()
                if hasattr(result, "__await__"):
                    await result
            if until(got):
                return got
            async for chunk in r.aiter_raw():
                for ev in parser.feed(chunk):
                    if ev.event in ("message", "ping") or ev.id is None:
                        continue
                    got.append(Got(int(ev.id), ev.event, json.loads(ev.data)))
                if until(got):
                    return got
    raise AssertionError(f"stream ended early after {len(got)} events")
