"""The anyio driver of the one "ask a human and wait" protocol, over the httpx
client: the MCP ``ask_human`` tool (mcp/ask.py) runs it. The rules — stream
first, then the post, only this request's decision, read back on reconnect and
at the deadline — are client/asking.py, shared with the hooks' blocking driver
(client/lite.py); here the steps are only carried out
(docs/behaviour.md#approval-round-trip, docs/behaviour.md#rules-on-the-waiting-side).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from mailui4agents.client import asking
from mailui4agents.client.asking import TIMEOUT, Decided, Duplicate, Failed, Outcome, TimedOut
from mailui4agents.client.errors import ApiError
from mailui4agents.wire import models as wire
from mailui4agents.wire.models import to_json

if TYPE_CHECKING:
    from mailui4agents.client.client import AsyncClient

__all__ = ["Asker", "Decided", "Duplicate", "Failed", "Outcome", "Post", "TimedOut", "ask_and_wait"]

_Message = asking.Message
# Posts the request, given the seconds left until the waiter gives up.
Post = Callable[[float], Awaitable[wire.PermissionOut | wire.Duplicate]]


def left(deadline: float) -> float:
    """Seconds until `deadline` (anyio clock), never negative."""
    return max(deadline - anyio.current_time(), 0.0)


class Asker:
    """One ask: ``async with Asker(client) as asker`` opens the agent's stream;
    ``ask`` carries out the three steps (open, post, wait). Leaving the block
    closes the stream."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._send, self._receive = anyio.create_memory_object_stream[_Message](math.inf)
        self._tasks: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._pump, self._send)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        try:
            return await self._tasks.__aexit__(exc_type, exc, tb)
        finally:
            self._send.close()
            self._receive.close()

    async def _pump(self, send: MemoryObjectSendStream[_Message]) -> None:
        """Forward the agent's stream: connections, retries, decisions, a refusal."""

        def connected() -> None:
            send.send_nowait(("connected", None))

        def retrying(failure: ApiError | None, _delay: float) -> None:
            send.send_nowait(("retry", failure))

        try:
            events = self.client.events(on_connect=connected, on_retry=retrying)
            async with aclosing(events) as stream:
                async for event in stream:
                    if event.type == "permission_decision":
                        send.send_nowait(("decision", event.data))
        except ApiError as exc:  # 401/403: the stream never retries these
            send.send_nowait(("error", exc))

    async def _run(self, steps: asking.Steps, post: Post | None = None) -> Any:
        """Carry out the steps' commands until they return their result."""
        try:
            command = next(steps)
            while True:
                command = steps.send(await self._do(command, post))
        except StopIteration as done:
            return done.value

    async def _do(self, command: asking.Command, post: Post | None) -> Any:
        if isinstance(command, asking.Receive):
            with anyio.move_on_after(left(command.until)):
                return await self._receive.receive()
            return None
        try:
            with anyio.fail_after(max(left(command.until), 0.001)):
                # The protocol reads the answers' JSON, as the hook's driver
                # (client/lite.py) gives it: the models' own, field for field.
                if isinstance(command, asking.Post):
                    assert post is not None
                    return to_json(await post(left(command.until)))
                return to_json(await self.client.get_permission(command.request_id))
        except ApiError as exc:
            return exc
        except TimeoutError:
            return TIMEOUT

    async def ask(self, post: Post, key: str, deadline: float) -> Outcome:
        """All three steps: open, post, wait."""
        result: Outcome = await self._run(asking.asking(key, deadline, anyio.current_time), post)
        return result


async def ask_and_wait(client: AsyncClient, post: Post, key: str, deadline: float) -> Outcome:
    """Open the stream, post, wait for this request's decision until `deadline`."""
    async with Asker(client) as asker:
        return await asker.ask(post, key, deadline)
