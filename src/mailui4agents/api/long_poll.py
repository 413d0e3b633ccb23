"""One long-poll: answer as soon as a thing is no longer pending, or after `wait`
seconds with it still pending (`GET …/permissions/{id}?wait=`,
`GET /api/v1/work/actions/{id}?wait=`; docs/api.md).

The poller is woken by its own principal's events (events/hub.py, `waiter`):
the event that settles the thing reaches it, so it reads the state again then,
not on a timer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

from mailui4agents.state import Gateway


class HasStatus(Protocol):
    @property
    def status(self) -> str: ...


T = TypeVar("T", bound=HasStatus)


async def until_settled(gw: Gateway, key: str, load: Callable[[], Awaitable[T]], wait: float) -> T:
    async with gw.hub.waiter(key) as wake:
        out = await load()
        with anyio.move_on_after(wait):
            while out.status == "pending":
                wake.clear()
                out = await load()
                if out.status == "pending":
                    await wake.wait()
        return await load()
