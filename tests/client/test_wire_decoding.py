"""The hook's standard-library transport (client/lite.py) decodes by hand what
the httpx client decodes with the wire models (src/mailui4agents/wire/): these
tests tie the two together, so that a change of a wire model fails here.

Real sockets: a small scripted HTTP/1.1 server on 127.0.0.1 port 0 answers each
request with bytes built from the wire models' own JSON.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.client import asking, lite, sse
from mailui4agents.client.backoff import Backoff
from mailui4agents.client.errors import ApiError, GatewayUnreachable
from mailui4agents.client.stream import iter_events
from mailui4agents.wire.errors import ErrorBody, ErrorDetail
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import (
    DecidedVia,
    Duplicate,
    PermissionDecisionEvent,
    PermissionOut,
    SessionOut,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEADLINE_S = 10.0


def permission(status: str, decision: str | None = None, **extra: Any) -> PermissionOut:
    return PermissionOut(
        id="r-1", session_id="s-1", kind="approval", agent="claude", tool_name="Bash",
        tool_input={"command": "npm test"}, status=status, decision=decision,
        note="ok" if decision else None, decided_by="ana" if decision else None,
        relay_key="hook:claude-code:s:t1", created_at=NOW, **extra,
    )  # fmt: skip


# -- the fields the protocol reads are the wire models' -------------------------------


def test_the_fields_the_protocol_reads_exist_in_the_wire_models() -> None:
    assert set(asking.PERMISSION_FIELDS) <= set(PermissionOut.model_fields)
    assert set(asking.EVENT_FIELDS) <= set(PermissionDecisionEvent.model_fields)
    assert Duplicate().status == asking.DUPLICATE
    assert asking.DECISION_EVENT == EventType.PERMISSION_DECISION
    assert sse.RESET == EventType.RESET
    assert "id" in SessionOut.model_fields
    assert set(asking.VIA_FIELDS) == set(DecidedVia.model_fields)


def test_a_decision_decodes_alike_from_the_answer_and_from_the_event() -> None:
    """The typed Decision the hook and ask_human read (client/asking.Decision),
    decoded from the wire models' own JSON: every field the waiting side reads,
    `decided_via` with its device included."""
    via = DecidedVia(channel="push", device="Ana's phone")
    answer = permission("approved", "approve", answers=["a"], decided_via=via)
    event = PermissionDecisionEvent(
        request_id="r-1", relay_key=answer.relay_key, session_id="s-1", kind="approval",
        status="approved", decision="approve", note="ok", answers=["a"], decided_by="ana",
        decided_via=via,
    )  # fmt: skip
    from_answer = asking.Decision.of(answer.model_dump(mode="json", by_alias=True))
    from_event = asking.Decision.of(event.model_dump(mode="json", by_alias=True))
    assert from_answer == from_event == asking.Decision(
        request_id="r-1", status="approved", decision="approve", note="ok", answers=("a",),
        decided_by="ana", decided_via=asking.Via("push", "Ana's phone"),
    )  # fmt: skip
    assert asking.Decided(answer.model_dump(mode="json")).decision == from_answer


# -- a scripted gateway on a real socket ----------------------------------------------

Handler = Callable[[str, dict[str, str], bytes, socket.socket], None]


class Server:
    """Serves each connection with the next handler; records what it was asked."""

    def __init__(self, handlers: list[Handler]) -> None:
        self.handlers = handlers
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for handler in self.handlers:  # in the order the connections come
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            raw, body = head.split(b"\r\n\r\n", 1)
            line, *lines = raw.decode().split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
            while len(body) < int(headers.get("content-length", "0")):
                body += conn.recv(65536)
            self.requests.append((line, headers, body))
            # Each answer in its own thread: a held stream must not block the next call.
            threading.Thread(target=self._answer, args=(handler, line, headers, body, conn),
                             daemon=True).start()  # fmt: skip

    @staticmethod
    def _answer(
        handler: Handler, line: str, headers: dict[str, str], body: bytes, conn: socket.socket
    ) -> None:
        with conn:
            handler(line, headers, body, conn)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[list[Handler]], Server]]:
    servers: list[Server] = []

    def start(handlers: list[Handler]) -> Server:
        servers.append(Server(handlers))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def answer(status: int, body: bytes, *, chunked: bool = False, **headers: str) -> Handler:
    def handle(_line: str, _h: dict[str, str], _b: bytes, conn: socket.socket) -> None:
        head = [f"HTTP/1.1 {status} X", "content-type: application/json"]
        head += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
        if chunked:  # split in two chunks, the second mid-way through the JSON
            half = len(body) // 2
            payload = b"".join(
                f"{len(part):x}\r\n".encode() + part + b"\r\n"
                for part in (body[:half], body[half:])
            )
            conn.sendall(("\r\n".join([*head, "transfer-encoding: chunked"]) + "\r\n\r\n").encode())
            conn.sendall(payload + b"0\r\n\r\n")
        else:
            head.append(f"content-length: {len(body)}")
            conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    return handle


def stream(*frames: bytes, hold: threading.Event | None = None) -> Handler:
    """An event stream: 200, the frames as chunks, then held open (or closed)."""

    def handle(_line: str, _h: dict[str, str], _b: bytes, conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for frame in (b": connected\n\n", *frames):
            conn.sendall(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
        if hold is not None:
            hold.wait(DEADLINE_S)

    return handle


def frame(event_id: int, event: str, data: dict[str, Any]) -> bytes:
    return f"id: {event_id}\nevent: {event}\ndata: {json.dumps(data)}\n\n".encode()


def until() -> float:
    return lite.clock() + DEADLINE_S


# -- round trips of the wire models through the hand decoder ---------------------------


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (permission("pending"), asking.Pending("r-1", "k")),
        (permission("approved", "approve"), "decided"),
        (permission("denied", "deny"), "decided"),
        (Duplicate(request_id="r-0"), asking.Duplicate()),
    ],
)
def test_a_posted_requests_answer_decodes_as_the_wire_model_says(
    serve: Callable[[list[Handler]], Server], model: Any, expected: Any, chunked: bool
) -> None:
    wire = model.model_dump(mode="json")
    server = serve([answer(201, model.model_dump_json().encode(), chunked=chunked)])
    gateway = lite.Gateway(server.url, "am_agent_x", "claude")
    decoded = gateway.request_permission("s-1", "k", until=until(), tool_name="Bash")
    assert decoded == wire  # the hand decoding is the model's JSON, field for field
    steps = asking.posting("k", until())
    command = next(steps)
    assert isinstance(command, asking.Post)
    with pytest.raises(StopIteration) as done:
        steps.send(decoded)
    if expected == "decided":
        assert done.value.value == asking.Decided(wire)
    else:
        assert done.value.value == expected
    line, headers, body = server.requests[0]
    assert line == "POST /api/v1/agent/permissions HTTP/1.1"
    assert headers["authorization"] == "Bearer am_agent_x" and headers["x-agent-name"] == "claude"
    assert json.loads(body) == {
        "session_id": "s-1", "kind": "approval", "relay_key": "k", "tool_name": "Bash",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("status", "detail"),
    [
        (409, ErrorDetail(code="conflict", message="", reason="mode_allows")),
        (404, ErrorDetail(code="not_found", message="no such session", field="session_id")),
        (429, ErrorDetail(code="rate_limited", message="slow down", retry_after=3)),
    ],
)
def test_errors_decode_the_same_on_both_transports(
    serve: Callable[[list[Handler]], Server], status: int, detail: ErrorDetail
) -> None:
    body = ErrorBody(error=detail).model_dump_json().encode()
    server = serve([answer(status, body, Retry_After="3")])
    gateway = lite.Gateway(server.url, "am_agent_x")
    with pytest.raises(ApiError) as raised:
        gateway.call("GET", "/agent/permissions/r-1", until=until())
    mine = raised.value
    theirs = ApiError.from_response(
        httpx.Response(status, content=body, headers={"Retry-After": "3"})
    )
    fields = ("status", "code", "message", "field", "body", "retry_after", "permanent", "detail")
    assert {f: getattr(mine, f) for f in fields} == {f: getattr(theirs, f) for f in fields}
    assert mine.detail == ErrorBody(error=detail).model_dump(mode="json")["error"]


def test_a_decision_event_decodes_as_the_wire_model_says(
    serve: Callable[[list[Handler]], Server],
) -> None:
    event = PermissionDecisionEvent(
        request_id="r-1", relay_key="k", session_id="s-1", kind="approval",
        status="approved", decision="approve", note="go", decided_by="ana",
    )  # fmt: skip
    data = event.model_dump(mode="json")
    hold = threading.Event()
    other = {**data, "request_id": "r-2"}
    frames = (
        frame(7, "new_mail", {"id": "m"}),
        frame(8, "permission_decision", other),
        frame(9, "permission_decision", data),
    )
    server = serve([stream(*frames, hold=hold)])
    events = lite.Gateway(server.url, "am_agent_x").events()
    try:
        assert events.receive(until()) == ("connected", None)
        assert events.receive(until()) == ("decision", other)
        assert events.receive(until()) == ("decision", data)
        assert events.cursor.resume == "9"
    finally:
        hold.set()
        events.close()
    line, headers, _ = server.requests[0]
    assert line == "GET /api/v1/agent/events HTTP/1.1"
    assert headers["accept"] == "text/event-stream"


# -- the blocking driver's safety nets, on real sockets ---------------------------------


def test_a_reconnect_resumes_after_the_last_id_and_reads_the_request_back(
    serve: Callable[[list[Handler]], Server],
) -> None:
    hold = threading.Event()
    closed = permission("approved", "approve")
    server = serve([
        stream(frame(3, "new_mail", {"id": "m"})),  # then the stream ends
        answer(201, permission("pending").model_dump_json().encode()),
        stream(hold=hold),  # the reconnect
        answer(200, closed.model_dump_json().encode()),  # the read-back
    ])  # fmt: skip
    gateway = lite.Gateway(server.url, "am_agent_x")
    events = lite.EventStream(gateway, Backoff(initial=0.001, cap=0.001))
    asker = lite.Asker(gateway)
    asker.stream = events

    def post(left: float) -> dict[str, Any]:
        return gateway.request_permission("s-1", "k", until=lite.clock() + left)

    try:
        deadline = until()
        assert asker.opened(DEADLINE_S) is None
        pending = asker.post(post, "k", deadline)
        assert pending == asking.Pending("r-1", "k")
        assert isinstance(pending, asking.Pending)
        assert asker.wait(pending, deadline) == asking.Decided(closed.model_dump(mode="json"))
        assert lite.clock() < deadline  # the reconnect's read-back, not the final check
    finally:
        hold.set()
        asker.__exit__()
    assert server.requests[2][1]["last-event-id"] == "3"
    assert server.requests[3][0] == "GET /api/v1/agent/permissions/r-1 HTTP/1.1"


def test_a_refused_stream_is_permanent_and_nothing_is_posted(
    serve: Callable[[list[Handler]], Server],
) -> None:
    body = ErrorBody(error=ErrorDetail(code="unauthorized", message="bad key")).model_dump_json()
    server = serve([answer(401, body.encode())])
    with lite.Asker(lite.Gateway(server.url, "am_agent_bad")) as asker:
        refused = asker.opened(DEADLINE_S)
    assert isinstance(refused, asking.Failed) and refused.stage == "stream"
    assert refused.error.status == 401 and refused.error.permanent
    assert len(server.requests) == 1


def test_a_200_that_is_not_an_event_stream_is_permanent_on_both_transports(
    serve: Callable[[list[Handler]], Server],
) -> None:
    # AGENTMAIL_URL pointing at something else: refused at once, never retried
    # (client/errors.not_an_event_stream, shared by both transports).
    server = serve([answer(200, b"{}"), answer(200, b"{}")])
    with lite.Asker(lite.Gateway(server.url, "am_agent_x")) as asker:
        refused = asker.opened(DEADLINE_S)
    assert isinstance(refused, asking.Failed) and refused.stage == "stream"
    mine = refused.error
    assert (mine.code, mine.permanent) == ("not_event_stream", True)

    async def through_httpx() -> ApiError:
        async with httpx.AsyncClient(base_url=server.url) as http:
            events = iter_events(
                http, "/api/v1/agent/events", headers={}, last_event_id=None, backoff=Backoff()
            )
            with pytest.raises(ApiError) as raised:
                await events.__anext__()
            return raised.value

    theirs = anyio.run(through_httpx)
    assert (theirs.code, theirs.permanent) == ("not_event_stream", True)
    assert len(server.requests) == 2  # one attempt each: nothing retried


def test_an_unreachable_gateway_is_transient() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with lite.Asker(lite.Gateway(f"http://127.0.0.1:{port}", "am_agent_x")) as asker:
        refused = asker.opened(DEADLINE_S)
    assert isinstance(refused, asking.Failed) and isinstance(refused.error, GatewayUnreachable)
    assert not refused.error.permanent


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("http://127.0.0.1:8025", (False, "127.0.0.1", 8025, "")),
        ("https://mail.example.org/agentmail/", (True, "mail.example.org", 443, "/agentmail")),
        ("http://[::1]:9/x", (False, "::1", 9, "/x")),
        ("HTTP://gw", (False, "gw", 80, "")),
    ],
)
def test_urls_split_by_hand(url: str, parts: tuple[bool, str, int, str]) -> None:
    assert lite.split_url(url) == parts


@pytest.mark.parametrize("url", ["ftp://gw", "gw:8025", "http://u:p@gw", "http://gw:x", "http://"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        lite.split_url(url)


def test_a_path_segment_is_quoted_like_urllib() -> None:
    from urllib.parse import quote

    for value in ("r-1", "a/b", "ü ?#%", "x.y_z~"):
        assert lite.quote(value) == quote(value, safe="")


def test_a_gateway_that_never_answers_does_not_hold_the_hook_past_its_deadline() -> None:
    # Accepts connections (the kernel's backlog) but never answers a byte.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with lite.Asker(lite.Gateway(url, "am_agent_x")) as asker:
            start = lite.clock()
            refused = asker.opened(0.3)
            returned = lite.clock()
    assert isinstance(refused, asking.Failed) and refused.stage == "stream"
    assert not refused.error.permanent
    # Bounded by the caller's 0.3 s, not by the transport's own connect limit.
    assert returned - start < lite.CONNECT_TIMEOUT_S


def test_a_key_revoked_while_waiting_ends_the_wait_at_once(
    serve: Callable[[list[Handler]], Server],
) -> None:
    # The stream ends; the reconnect is refused (401): permanent, never retried.
    refusal = ErrorBody(error=ErrorDetail(code="unauthorized", message="key revoked"))
    server = serve([
        stream(),
        answer(201, permission("pending").model_dump_json().encode()),
        answer(401, refusal.model_dump_json().encode()),
    ])  # fmt: skip
    gateway = lite.Gateway(server.url, "am_agent_x")
    asker = lite.Asker(gateway)
    asker.stream = lite.EventStream(gateway, Backoff(initial=0.001, cap=0.001))
    with asker:
        deadline = until()
        assert asker.opened(DEADLINE_S) is None
        pending = asker.post(
            lambda left: gateway.request_permission("s-1", "k", until=lite.clock() + left),
            "k",
            deadline,
        )
        assert isinstance(pending, asking.Pending)
        result = asker.wait(pending, deadline)
        assert lite.clock() < deadline  # at once, not at the deadline
    assert isinstance(result, asking.Failed) and result.stage == "wait"
    assert result.error.status == 401 and result.error.message == "key revoked"
