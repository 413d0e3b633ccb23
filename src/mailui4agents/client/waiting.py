"""Ask a human and wait for the decision: the one protocol of the hooks, the MCP
``ask_human`` tool and the bridge (docs/behaviour.md#approval-round-trip and
docs/behaviour.md#rules-on-the-waiting-side).

1. The agent's event stream is opened FIRST; only when the gateway has accepted
   it (from then on nothing committed can be missed) is the request posted.
   Opening it after the post leaves a window in which the decision is pushed to
   nobody.
2. While waiting, only a decision for *this* request counts: one agent's streams
   carry the decisions of all its requests (a bridge and other hooks share them).
3. As a safety net the request is read back whenever the stream reconnects and
   once more at the deadline.

What a caller makes of each outcome (allow, deny, an answer text, an error) is
its own business: hooks/outcomes.py and mcp/ask.py. Here nothing is allowed or
refused; outcomes only say what happened.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from mailui4agents.client.client import AsyncClient
from mailui4agents.client.errors import ApiError

# How long opening the event stream may take before the gateway counts as unavailable.
CONNECT_TIMEOUT_S = 10.0
# The last look at the request after the deadline.
FINAL_CHECK_S = 2.0


@dataclass(frozen=True)
class Decided:
    """The request is closed: `data` has its `decision` (approve, deny, expired,
    cancelled), `note`, `answers`, `decided_by` — from the event or read back."""

    data: Mapping[str, Any]


@dataclass(frozen=True)
class Pending:
    """Posted and waiting for a human."""

    request_id: str
    key: str


@dataclass(frozen=True)
class Duplicate:
    """The gateway already has a request with this relay key: nobody will decide
    this one (the waiting side must not allow)."""


@dataclass(frozen=True)
class Failed:
    """The gateway refused (a permanent error) or could not be reached (transient).
    `stage` says whether anyone may have been asked: never before "wait"."""

    error: ApiError
    stage: Literal["stream", "post", "wait"]


@dataclass(frozen=True)
class TimedOut:
    """Nobody decided in time. `failure` is set when the gateway could not even be
    read at the deadline (then it may be gone, not only the human silent)."""

    stage: Literal["post", "wait"]
    failure: ApiError | None = None


Outcome = Decided | Duplicate | Failed | TimedOut

# From the stream task: ("connected", None), ("retry", ApiError | None),
# ("decision", event data), ("error", ApiError).
_Message = tuple[str, Any]
# Posts the request, given the seconds left until the waiter gives up (the caller
# rounds them into the request's timeout_s, so that the gateway expires the request
# when nobody waits for it any more).
Post = Callable[[float], Awaitable[Mapping[str, Any]]]


def unreachable(message: str) -> ApiError:
    """A transient failure that never got an HTTP answer."""
    return ApiError(None, "unreachable", message)


def left(deadline: float) -> float:
    """Seconds until `deadline` (anyio clock), never negative."""
    return max(deadline - anyio.current_time(), 0.0)


def is_own_decision(data: Mapping[str, Any], request_id: str, key: str) -> bool:
    """This request's decision, never another one's. The request id decides; the
    relay key (unique per call) only when an event carries no id."""
    event_id = data.get("request_id")
    if event_id is not None:
        return bool(event_id == request_id)
    return bool(data.get("relay_key") == key)


class Asker:
    """One ask: ``async with Asker(client) as asker`` opens the agent's stream;
    ``opened``, ``post`` and ``wait`` are the three steps (``ask`` does all three).
    Leaving the block closes the stream."""

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

    async def opened(self, within: float) -> Failed | None:
        """None once the stream is open; else why the gateway is unavailable."""
        with anyio.move_on_after(within):
            while True:
                kind, value = await self._receive.receive()
                if kind == "connected":
                    return None
                if kind == "error":
                    return Failed(value, "stream")
                if kind == "retry":  # failed before it ever connected: do not wait it out
                    failure = value if value is not None else unreachable("the stream ended")
                    return Failed(failure, "stream")
        return Failed(unreachable(f"the event stream did not open within {within:g} s"), "stream")

    async def post(self, post: Post, key: str, deadline: float) -> Pending | Outcome:
        """Post the request, within the time left until `deadline`."""
        try:
            with anyio.fail_after(max(left(deadline), 0.001)):
                created = await post(left(deadline))
        except ApiError as exc:
            return Failed(exc, "post")
        except TimeoutError:
            return TimedOut("post")
        if created.get("status") == "duplicate_relay":
            return Duplicate()
        if created.get("status") != "pending":  # decided at once (a standing grant)
            return Decided(created)
        return Pending(str(created["id"]), key)

    async def wait(self, pending: Pending, deadline: float) -> Outcome:
        """Wait for this request's decision until `deadline`, then look once more."""
        with anyio.move_on_after(left(deadline)):
            while True:
                kind, value = await self._receive.receive()
                if kind == "decision" and is_own_decision(value, pending.request_id, pending.key):
                    return Decided(value)
                if kind == "connected":  # reconnected: read the request back, in case
                    decided, _ = await self._read_back(pending.request_id)
                    if decided is not None:
                        return Decided(decided)
                if kind == "error":
                    return Failed(value, "wait")
        failure: ApiError | None = unreachable("no answer within the final check")
        with anyio.move_on_after(FINAL_CHECK_S):
            decided, failure = await self._read_back(pending.request_id)
            if decided is not None:
                return Decided(decided)
        transient = failure if failure is not None and not failure.permanent else None
        return TimedOut("wait", transient)

    async def _read_back(self, request_id: str) -> tuple[dict[str, Any] | None, ApiError | None]:
        """(the request if no longer pending, the failure if it could not be read)."""
        try:
            current = await self.client.get_permission(request_id)
        except ApiError as exc:
            return None, exc  # the stream (or the deadline) will tell
        return (None if current.get("status") == "pending" else current), None

    async def ask(self, post: Post, key: str, deadline: float) -> Outcome:
        """All three steps: open, post, wait."""
        refused = await self.opened(min(CONNECT_TIMEOUT_S, left(deadline)))
        if refused is not None:
            return refused
        posted = await self.post(post, key, deadline)
        if not isinstance(posted, Pending):
            return posted
        return await self.wait(posted, deadline)


async def ask_and_wait(client: AsyncClient, post: Post, key: str, deadline: float) -> Outcome:
    """Open the stream, post, wait for this request's decision until `deadline`."""
    async with Asker(client) as asker:
        return await asker.ask(post, key, deadline)
