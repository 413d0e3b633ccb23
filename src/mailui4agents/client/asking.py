"""Ask a human and wait for the decision: the rules of the one protocol of the
hooks, the MCP ``ask_human`` tool and the bridge, with no I/O of their own
(docs/behaviour.md#approval-round-trip and docs/behaviour.md#rules-on-the-waiting-side).

1. The agent's event stream is opened FIRST; only when the gateway has accepted
   it (from then on nothing committed can be missed) is the request posted.
   Opening it after the post leaves a window in which the decision is pushed to
   nobody.
2. While waiting, only a decision for *this* request counts: one agent's streams
   carry the decisions of all its requests (a bridge and other hooks share them).
3. As a safety net the request is read back whenever the stream reconnects and
   once more at the deadline.

The steps are generators ("sans I/O"): they yield what they need — the next
message of the stream (:class:`Receive`), the post (:class:`Post`), a read-back
(:class:`ReadBack`), each with an absolute deadline — and are sent its result.
Two thin drivers run them: client/waiting.py on anyio with the httpx client
(the MCP server), client/lite.py on blocking sockets of the standard library
(the hooks, which must start fast). Neither decides anything; this module
imports only the standard library.

What a caller makes of each outcome (allow, deny, an answer text, an error) is
its own business: hooks/outcomes.py and mcp/ask.py. Here nothing is allowed or
refused; outcomes only say what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Literal

from mailui4agents.client.errors import ApiError
from mailui4agents.domain.values import Value

# How long opening the event stream may take before the gateway counts as unavailable.
CONNECT_TIMEOUT_S = 10.0
# The last look at the request after the deadline.
FINAL_CHECK_S = 2.0

# The fields of the gateway's answers that the protocol and the waiting side
# read (wire/models.py PermissionOut, Duplicate, PermissionDecisionEvent):
# tests/client/test_wire_decoding.py checks each against the wire models.
PERMISSION_FIELDS = ("id", "status", "decision", "note", "answers", "decided_by", "decided_via")
EVENT_FIELDS = (
    "request_id", "relay_key", "status", "decision", "note", "answers", "decided_by",
    "decided_via",
)  # fmt: skip
VIA_FIELDS = ("channel", "device")
PENDING = "pending"
DUPLICATE = "duplicate_relay"
DECISION_EVENT = "permission_decision"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class Via(Value):
    """Where a decision came from: wire/models.py DecidedVia, decoded."""

    __slots__ = ("channel", "device")
    channel: str | None
    device: str | None

    def __init__(self, channel: str | None, device: str | None = None) -> None:
        self._init(channel=channel, device=device)


class Decision(Value):
    """A closed request as the waiting side reads it, typed: decoded by `of` from
    a PermissionOut or a ``permission_decision`` event's data, the same fields of
    both (wire/models.py; tests/client/test_wire_decoding.py decodes the models'
    own JSON). A light value, not the pydantic model: the hook process must not
    import pydantic (client/lite.py). `decision`: approve, deny, expired,
    cancelled — or whatever else the gateway said, as text, which allows nothing
    (domain/policy.outcome_allows)."""

    __slots__ = ("answers", "decided_by", "decided_via", "decision", "note", "request_id", "status")
    request_id: str | None
    status: str | None
    decision: str | None
    note: str | None
    answers: tuple[str, ...] | None
    decided_by: str | None
    decided_via: Via | None

    def __init__(
        self,
        *,
        request_id: str | None = None,
        status: str | None = None,
        decision: str | None = None,
        note: str | None = None,
        answers: tuple[str, ...] | None = None,
        decided_by: str | None = None,
        decided_via: Via | None = None,
    ) -> None:
        self._init(
            request_id=request_id, status=status, decision=decision, note=note,
            answers=answers, decided_by=decided_by, decided_via=decided_via,
        )  # fmt: skip

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Decision:
        """Decode the gateway's JSON (PermissionOut: `id`; the event: `request_id`).
        A field of the wrong type counts as absent; a non-text decision is kept
        as its text (it allows nothing)."""
        decision = data.get("decision")
        answers = data.get("answers")
        via = data.get("decided_via")
        return cls(
            request_id=_text(data.get("request_id")) or _text(data.get("id")),
            status=_text(data.get("status")),
            decision=decision if decision is None or isinstance(decision, str) else repr(decision),
            note=_text(data.get("note")),
            answers=tuple(str(a) for a in answers) if isinstance(answers, list) else None,
            decided_by=_text(data.get("decided_by")),
            decided_via=(
                Via(_text(via.get("channel")), _text(via.get("device")))
                if isinstance(via, Mapping)
                else None
            ),
        )


class Decided(Value):
    """The request is closed: its `decision` (a Decision), from the event or
    read back. Built from the gateway's JSON object."""

    __slots__ = ("decision",)
    decision: Decision

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._init(decision=Decision.of(data))


class Pending(Value):
    """Posted and waiting for a human."""

    __slots__ = ("key", "request_id")
    request_id: str
    key: str

    def __init__(self, request_id: str, key: str) -> None:
        self._init(request_id=request_id, key=key)


class Duplicate(Value):
    """The gateway already has a request with this relay key: nobody will decide
    this one (the waiting side must not allow)."""

    __slots__ = ()


class Failed(Value):
    """The gateway refused (a permanent error) or could not be reached (transient).
    `stage` says whether anyone may have been asked: never before "wait"."""

    __slots__ = ("error", "stage")
    error: ApiError
    stage: Literal["stream", "post", "wait"]

    def __init__(self, error: ApiError, stage: Literal["stream", "post", "wait"]) -> None:
        self._init(error=error, stage=stage)


class TimedOut(Value):
    """Nobody decided in time. `failure` is set when the gateway could not even be
    read at the deadline (then it may be gone, not only the human silent)."""

    __slots__ = ("failure", "stage")
    stage: Literal["post", "wait"]
    failure: ApiError | None

    def __init__(self, stage: Literal["post", "wait"], failure: ApiError | None = None) -> None:
        self._init(stage=stage, failure=failure)


Outcome = Decided | Duplicate | Failed | TimedOut


# -- what the steps ask their driver for ----------------------------------------------


class Receive(Value):
    """The stream's next message before `until`, or None when `until` passed. A
    message is ("connected", None), ("retry", ApiError | None), ("decision", the
    data of a ``permission_decision`` event) or ("error", ApiError): a permanent
    refusal of the stream, which is never retried."""

    __slots__ = ("until",)
    until: float

    def __init__(self, until: float) -> None:
        self._init(until=until)


class Post(Value):
    """Post the request, given the seconds left until `until` (the caller rounds
    them into the request's ``timeout_s``, so that the gateway expires the request
    when nobody waits for it any more). Result: the answer's JSON object, the
    ApiError, or TIMEOUT."""

    __slots__ = ("until",)
    until: float

    def __init__(self, until: float) -> None:
        self._init(until=until)


class ReadBack(Value):
    """``GET /agent/permissions/{id}`` before `until`. Result: the JSON object,
    the ApiError, or TIMEOUT."""

    __slots__ = ("request_id", "until")
    request_id: str
    until: float

    def __init__(self, request_id: str, until: float) -> None:
        self._init(request_id=request_id, until=until)


class _Timeout:
    def __repr__(self) -> str:
        return "TIMEOUT"


#: The result of a Post or ReadBack that did not finish before its deadline.
TIMEOUT: Any = _Timeout()

Command = Receive | Post | ReadBack
Message = tuple[str, Any]
Steps = Generator[Command, Any, Any]
Clock = Callable[[], float]


def unreachable(message: str) -> ApiError:
    """A transient failure that never got an HTTP answer."""
    return ApiError(None, "unreachable", message)


def is_own_decision(data: Mapping[str, Any], request_id: str, key: str) -> bool:
    """This request's decision, never another one's. The request id decides; the
    relay key (unique per call) only when an event carries no id."""
    event_id = data.get("request_id")
    if event_id is not None:
        return bool(event_id == request_id)
    return bool(data.get("relay_key") == key)


def opening(within: float, clock: Clock) -> Generator[Command, Any, Failed | None]:
    """Wait for the stream to open: None once it is, else why the gateway is unavailable."""
    until = clock() + within
    while True:
        message = yield Receive(until)
        if message is None:
            failure = unreachable(f"the event stream did not open within {within:g} s")
            return Failed(failure, "stream")
        kind, value = message
        if kind == "connected":
            return None
        if kind == "error":
            return Failed(value, "stream")
        if kind == "retry":  # failed before it ever connected: do not wait it out
            return Failed(value if value is not None else unreachable("the stream ended"), "stream")


def posting(key: str, deadline: float) -> Generator[Command, Any, Pending | Outcome]:
    """Post the request, within the time left until `deadline`."""
    created = yield Post(deadline)
    if isinstance(created, ApiError):
        return Failed(created, "post")
    if created is TIMEOUT:
        return TimedOut("post")
    status = created.get("status")
    if status == DUPLICATE:
        return Duplicate()
    if status != PENDING:  # decided at once (a standing grant)
        return Decided(created)
    return Pending(str(created["id"]), key)


def waiting(pending: Pending, deadline: float, clock: Clock) -> Generator[Command, Any, Outcome]:
    """Wait for this request's decision until `deadline`, then look once more."""
    while True:
        message = yield Receive(deadline)
        if message is None:
            break
        kind, value = message
        if kind == "decision" and is_own_decision(value, pending.request_id, pending.key):
            return Decided(value)
        if kind == "connected":  # reconnected: read the request back, in case
            current = yield ReadBack(pending.request_id, deadline)
            if current is TIMEOUT:
                break
            if not isinstance(current, ApiError) and current.get("status") != PENDING:
                return Decided(current)  # an error: the stream (or the deadline) will tell
        if kind == "error":
            return Failed(value, "wait")
    failure: ApiError | None = unreachable("no answer within the final check")
    current = yield ReadBack(pending.request_id, clock() + FINAL_CHECK_S)
    if isinstance(current, ApiError):
        failure = current
    elif current is not TIMEOUT:
        if current.get("status") != PENDING:
            return Decided(current)
        failure = None
    transient = failure if failure is not None and not failure.permanent else None
    return TimedOut("wait", transient)


def asking(key: str, deadline: float, clock: Clock) -> Generator[Command, Any, Outcome]:
    """All three steps: open, post, wait."""
    refused = yield from opening(min(CONNECT_TIMEOUT_S, max(deadline - clock(), 0.0)), clock)
    if refused is not None:
        return refused
    posted = yield from posting(key, deadline)
    if not isinstance(posted, Pending):
        return posted
    return (yield from waiting(posted, deadline, clock))
