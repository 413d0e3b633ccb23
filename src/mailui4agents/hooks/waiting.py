"""Ask a human and wait for the decision (SPEC §7.3 step 1, §7.4).

The event stream is opened FIRST; only when the gateway has accepted it (from
then on no event can be missed) is the request posted. Opening it after the
post would leave a window in which the decision is pushed to nobody.

While waiting, only a decision for *this* request counts: one agent's streams
carry the decisions of all its requests (a bridge and other hooks share them),
so every other request's decision is ignored. As a safety net the request is
read back whenever the stream reconnects and once more at the deadline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mailui4agents.client import ApiError, AsyncClient
from mailui4agents.hooks.outcomes import duplicate, from_decision, from_error
from mailui4agents.hooks.parking import parked
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall, deny

# How long opening the event stream may take before the gateway counts as unavailable.
CONNECT_TIMEOUT_S = 10.0
# The last look at the request after the deadline.
FINAL_CHECK_S = 2.0

# Messages from the stream task: ("connected", None), ("retry", ApiError | None),
# ("decision", event data), ("error", ApiError).
Message = tuple[str, Any]


async def ask_human(
    gateway: AsyncClient,
    call: ToolCall,
    settings: HookSettings,
    *,
    session_id: str,
    key: str,
    deadline: float,
) -> HookDecision:
    """Post the request for ``call`` and wait until ``deadline`` (anyio clock)."""
    send, receive = anyio.create_memory_object_stream[Message](math.inf)
    # The task group closes first, so the stream task never writes to a closed channel.
    async with send, receive, anyio.create_task_group() as tasks:
        tasks.start_soon(_pump, gateway, send)
        try:
            return await _round_trip(
                gateway, receive, call, settings, session_id=session_id, key=key, deadline=deadline
            )
        finally:
            tasks.cancel_scope.cancel()
    raise AssertionError("unreachable: the round trip returns or raises")  # for mypy


async def _pump(gateway: AsyncClient, send: MemoryObjectSendStream[Message]) -> None:
    """Forward the agent's stream: connections, retries, decisions, a permanent refusal."""

    def connected() -> None:
        send.send_nowait(("connected", None))

    def retrying(failure: ApiError | None, _delay: float) -> None:
        send.send_nowait(("retry", failure))

    try:
        async with aclosing(gateway.events(on_connect=connected, on_retry=retrying)) as events:
            async for event in events:
                if event.type == "permission_decision":
                    send.send_nowait(("decision", event.data))
    except ApiError as exc:  # 401/403: the stream never retries these
        send.send_nowait(("error", exc))


async def _round_trip(
    gateway: AsyncClient,
    receive: MemoryObjectReceiveStream[Message],
    call: ToolCall,
    settings: HookSettings,
    *,
    session_id: str,
    key: str,
    deadline: float,
) -> HookDecision:
    mail_driven = settings.mail_driven
    refused = await _wait_connected(receive, min(CONNECT_TIMEOUT_S, _left(deadline)), mail_driven)
    if refused is not None:
        return refused
    # The gateway expires the request at our deadline (rounded down), so a human
    # cannot approve a request this hook has already given up on.
    timeout_s = max(1, int(_left(deadline)))
    try:
        with anyio.fail_after(max(_left(deadline), 0.001)):
            created = await gateway.request_permission(
                session_id,
                key,
                kind="approval",
                tool_name=call.tool_name,
                tool_input=call.tool_input,
                summary=_summary(call),
                timeout_s=timeout_s,
            )
    except ApiError as exc:
        return from_error(exc, mail_driven=mail_driven)
    except TimeoutError:
        return deny(f"timed out: the gateway did not take the request within {timeout_s} s")
    if created.get("status") == "duplicate_relay":
        return duplicate()
    if created.get("status") != "pending":  # decided at once (a standing grant)
        return from_decision(created, timeout_s=timeout_s)
    request_id = str(created["id"])
    async with parked(settings.env, request_id) as parking:  # the bridge pauses the clock
        decision = await _wait_decision(
            gateway, receive, request_id, key, deadline, timeout_s, mail_driven
        )
        # Mail that reached the session while the agent waited goes to the model
        # with the decision (SPEC §7.3 step 5); the bridge also delivers it next.
        news = await parking.news()
    if news:
        decision = replace(decision, reason=f"{decision.reason}\n\n{news}", context=news)
    return decision


async def _wait_connected(
    receive: MemoryObjectReceiveStream[Message], within: float, mail_driven: bool
) -> HookDecision | None:
    """None once the stream is open; else the decision for an unreachable gateway."""
    with anyio.move_on_after(within):
        while True:
            kind, value = await receive.receive()
            if kind == "connected":
                return None
            if kind == "error":
                return from_error(value, mail_driven=mail_driven)
            if kind == "retry":  # failed before it ever connected: do not wait it out
                failure = value if value is not None else _unreachable("the stream ended")
                return from_error(failure, mail_driven=mail_driven)
    return from_error(
        _unreachable(f"the event stream did not open within {within:g} s"),
        mail_driven=mail_driven,
    )


async def _wait_decision(
    gateway: AsyncClient,
    receive: MemoryObjectReceiveStream[Message],
    request_id: str,
    key: str,
    deadline: float,
    timeout_s: int,
    mail_driven: bool,
) -> HookDecision:
    with anyio.move_on_after(_left(deadline)):
        while True:
            kind, value = await receive.receive()
            if kind == "decision" and is_own_decision(value, request_id, key):
                return from_decision(value, timeout_s=timeout_s)
            if kind == "connected":  # reconnected: read the request back, in case
                decided, _ = await _read_back(gateway, request_id)
                if decided is not None:
                    return from_decision(decided, timeout_s=timeout_s)
            if kind == "error":
                return from_error(value, mail_driven=mail_driven)
    failure: ApiError | None = _unreachable("no answer within the final check")
    with anyio.move_on_after(FINAL_CHECK_S):
        decided, failure = await _read_back(gateway, request_id)
        if decided is not None:
            return from_decision(decided, timeout_s=timeout_s)
    if failure is not None and not failure.permanent:
        # The gateway is gone at the deadline: say so, and in an interactive session
        # let the person at the terminal decide (a transient failure, SPEC §7.4).
        fallback = from_error(failure, mail_driven=mail_driven)
        return replace(fallback, reason=f"timed out after {timeout_s} s; {fallback.reason}")
    return deny(f"timed out: nobody decided within {timeout_s} s")


def is_own_decision(data: Mapping[str, Any], request_id: str, key: str) -> bool:
    """This request's decision, never another one's (SPEC §7.4). The request id
    decides; the relay key (unique per tool call) only when an event has no id."""
    event_id = data.get("request_id")
    if event_id is not None:
        return bool(event_id == request_id)
    return bool(data.get("relay_key") == key)


async def _read_back(
    gateway: AsyncClient, request_id: str
) -> tuple[dict[str, Any] | None, ApiError | None]:
    """(the request if no longer pending, the failure if it could not be read)."""
    try:
        current = await gateway.get_permission(request_id)
    except ApiError as exc:
        return None, exc  # the stream (or the deadline) will tell
    return (None if current.get("status") == "pending" else current), None


def _summary(call: ToolCall) -> str | None:
    """The file a file tool writes, for the mail subject. Never the command: the
    gateway masks secrets in ``tool_input`` (and builds the subject from its
    masked command) but shows ``summary`` as given."""
    for name in ("file_path", "notebook_path", "path"):
        value = call.tool_input.get(name)
        if isinstance(value, str) and value.strip():
            return f"{call.tool_name} {value.strip().splitlines()[0]}"
    return None


def _left(deadline: float) -> float:
    return max(deadline - anyio.current_time(), 0.0)


def _unreachable(message: str) -> ApiError:
    return ApiError(None, "unreachable", message)
