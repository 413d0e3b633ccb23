"""``ask_human``: a question to the people of the current mail session, and the
wait for their answer (SPEC §7.3, §7.6).

The event stream is opened FIRST and the question posted only once the gateway
has accepted it, so the answer cannot be pushed before anyone listens. Only
this question's decision counts (an agent's streams carry every decision of
all its requests); on a reconnect, and once more at the deadline, the request
is read back in case its decision went by unseen.

Every way of not getting an answer is an error with its own words: the human
refused (with the note), nobody answered in time ("timed out waiting for an
answer"), the gateway expired or cancelled the question, or refused to ask.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.fastmcp.exceptions import ToolError

from mailui4agents.client import ApiError, AsyncClient
from mailui4agents.domain.relay_keys import clamp_relay_key

# How long opening the event stream may take.
CONNECT_TIMEOUT_S = 10.0
# The last look at the request after the deadline.
FINAL_CHECK_S = 2.0

# From the stream task: ("connected", None), ("retry", ApiError | None),
# ("decision", event data), ("error", ApiError).
Message = tuple[str, Any]


def relay_key(session_id: str) -> str:
    """A key unique per call: asking the same question twice asks twice."""
    return clamp_relay_key(f"mcp:ask:{session_id}:{uuid.uuid4()}")


async def ask(
    client: AsyncClient,
    *,
    session_id: str,
    question: str,
    options: Sequence[str] | None,
    multi_select: bool,
    timeout_s: float,
) -> str:
    """Post the question and wait at most ``timeout_s`` for the answer text."""
    deadline = anyio.current_time() + timeout_s
    send, receive = anyio.create_memory_object_stream[Message](math.inf)
    answer: str | None = None
    failure: ToolError | None = None
    async with send, receive, anyio.create_task_group() as tasks:
        tasks.start_soon(_pump, client, send)
        try:
            answer = await _round_trip(
                client,
                receive,
                session_id=session_id,
                question=question,
                options=options,
                multi_select=multi_select,
                timeout_s=timeout_s,
                deadline=deadline,
            )
        except ToolError as error:  # raised below, not wrapped in the task group's ExceptionGroup
            failure = error
        finally:
            tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert answer is not None
    return answer


async def _pump(client: AsyncClient, send: MemoryObjectSendStream[Message]) -> None:
    def connected() -> None:
        send.send_nowait(("connected", None))

    def retrying(failure: ApiError | None, _delay: float) -> None:
        send.send_nowait(("retry", failure))

    try:
        async with aclosing(client.events(on_connect=connected, on_retry=retrying)) as events:
            async for event in events:
                if event.type == "permission_decision":
                    send.send_nowait(("decision", event.data))
    except ApiError as exc:  # 401/403: never retried by the stream
        send.send_nowait(("error", exc))


async def _round_trip(
    client: AsyncClient,
    receive: MemoryObjectReceiveStream[Message],
    *,
    session_id: str,
    question: str,
    options: Sequence[str] | None,
    multi_select: bool,
    timeout_s: float,
    deadline: float,
) -> str:
    await _wait_connected(receive, min(CONNECT_TIMEOUT_S, _left(deadline)))
    key = relay_key(session_id)
    try:
        with anyio.fail_after(max(_left(deadline), 0.001)):
            created = await client.request_permission(
                session_id,
                key,
                kind="question",
                question=question,
                options=[{"label": label} for label in options] if options else None,
                multi_select=True if options and multi_select else None,
                # The gateway expires the question when this call gives up on it,
                # so nobody answers a question that no one waits for any more.
                timeout_s=max(1, math.ceil(_left(deadline))),
            )
    except TimeoutError:
        raise ToolError(_timed_out(timeout_s)) from None
    except ApiError as error:
        raise ToolError(f"the gateway did not ask: {error.message}") from error
    if created.get("status") == "duplicate_relay":
        raise ToolError("the gateway already has this question (duplicate relay key); not asked")
    request_id = str(created["id"])
    if created.get("status") != "pending":
        return outcome(created, timeout_s)
    return await _wait_answer(client, receive, request_id, key, deadline, timeout_s)


async def _wait_connected(receive: MemoryObjectReceiveStream[Message], within: float) -> None:
    with anyio.move_on_after(within):
        while True:
            kind, value = await receive.receive()
            if kind == "connected":
                return
            if kind == "error":
                raise ToolError(f"the gateway refused the event stream: {value.message}")
            if kind == "retry":
                reason = value.message if value is not None else "the stream ended at once"
                raise ToolError(f"the gateway is unavailable, nobody was asked: {reason}")
    raise ToolError(
        f"the gateway is unavailable, nobody was asked: its event stream did not open "
        f"within {within:g} s"
    )


async def _wait_answer(
    client: AsyncClient,
    receive: MemoryObjectReceiveStream[Message],
    request_id: str,
    key: str,
    deadline: float,
    timeout_s: float,
) -> str:
    with anyio.move_on_after(_left(deadline)):
        while True:
            kind, value = await receive.receive()
            if kind == "decision" and is_own(value, request_id, key):
                return outcome(value, timeout_s)
            if kind == "connected":  # reconnected: the decision may have gone by
                decided = await _read_back(client, request_id)
                if decided is not None:
                    return outcome(decided, timeout_s)
            if kind == "error":
                raise ToolError(f"the gateway refused the event stream: {value.message}")
    with anyio.move_on_after(FINAL_CHECK_S):
        decided = await _read_back(client, request_id)
        if decided is not None:
            return outcome(decided, timeout_s)
    raise ToolError(_timed_out(timeout_s))


def is_own(data: Mapping[str, Any], request_id: str, key: str) -> bool:
    """This question's decision; the relay key decides only when the event has no id."""
    event_id = data.get("request_id")
    if event_id is not None:
        return bool(event_id == request_id)
    return bool(data.get("relay_key") == key)


async def _read_back(client: AsyncClient, request_id: str) -> dict[str, Any] | None:
    try:
        current = await client.get_permission(request_id)
    except ApiError:
        return None  # the stream (or the deadline) will tell
    return None if current.get("status") == "pending" else current


def outcome(data: Mapping[str, Any], timeout_s: float) -> str:
    """The answer text of a decided question, or the ToolError that says why there is none."""
    decision = data.get("decision")
    note = data.get("note")
    note_text = note.strip() if isinstance(note, str) and note.strip() else ""
    who = str(data.get("decided_by") or "someone")
    if decision == "approve":
        answers = [str(a) for a in data.get("answers") or [] if str(a).strip()]
        if not answers:
            text = f"{who} accepted without an answer text"
        elif len(answers) == 1:
            text = f"{who} answered: {answers[0]}"
        else:
            text = f"{who} answered:\n" + "\n".join(f"- {a}" for a in answers)
        return f"{text}\nnote: {note_text}" if note_text else text
    if decision == "deny":
        raise ToolError(f"the human refused: {note_text or '(no note given)'}")
    if decision == "expired":
        raise ToolError(f"the question expired unanswered: {_timed_out(timeout_s)}")
    if decision == "cancelled":
        raise ToolError(
            f"the question was cancelled by {who} (the session was archived or closed); "
            "there is no answer"
        )
    raise ToolError(f"no answer: the gateway reported decision {decision!r}")


def _timed_out(timeout_s: float) -> str:
    return (
        f"timed out waiting for an answer after {timeout_s:g} s "
        "(nobody answered; ask again later or go on without the answer)"
    )


def _left(deadline: float) -> float:
    return max(0.0, deadline - anyio.current_time())
