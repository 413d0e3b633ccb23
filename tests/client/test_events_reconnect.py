"""The event stream against a real HTTP server that keeps dropping the connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tests.live_app import uvicorn_thread

from mailui4agents.client import ApiError, AsyncClient, ClientConfig, Event

EVENTS: list[tuple[int, str, dict[str, Any]]] = [
    (1, "new_mail", {"mail_id": "m1", "subject": "café"}),
    (2, "session_update", {"id": "s1"}),
    (3, "new_mail", {"mail_id": "m2"}),
    (4, "permission_decision", {"request_id": "p1", "decision": "approve"}),
    (5, "new_mail", {"mail_id": "m3"}),
    (6, "new_mail", {"mail_id": "m4"}),
    (7, "session_update", {"id": "s2"}),
]
REVOKED = "am_agent_revoked"


class Dropped(Exception):
    """Raised inside the response body to cut the connection mid-stream."""


@dataclass
class FakeGateway:
    """An SSE endpoint that replays after Last-Event-ID and drops after two events."""

    fail_first: int = 0  # answer 503 to this many requests first
    overlap: int = 0  # replay this many already-seen events (a sloppy server)
    requests: list[dict[str, str | None]] = field(default_factory=list)
    url: str = ""

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/api/v1/agent/events", self.stream)])

    async def stream(self, request: Request) -> Response:
        last = request.headers.get("last-event-id")
        self.requests.append(
            {
                "last_event_id": last,
                "authorization": request.headers.get("authorization"),
                "agent": request.headers.get("x-agent-name"),
                "accept": request.headers.get("accept"),
            }
        )
        if request.headers.get("authorization") == f"Bearer {REVOKED}":
            error = {"code": "unauthorized", "message": "this key was revoked"}
            return JSONResponse({"error": error}, status_code=401)
        if len(self.requests) <= self.fail_first:
            error = {"code": "unavailable", "message": "starting up"}
            return JSONResponse({"error": error}, status_code=503)
        start = max(0, int(last or 0) - self.overlap)
        pending = [event for event in EVENTS if event[0] > start]
        abrupt = len(self.requests) % 2 == 0  # alternate a clean end and a cut connection
        return StreamingResponse(
            self._frames(pending[:2], more=len(pending) > 2, abrupt=abrupt),
            media_type="text/event-stream",
        )

    async def _frames(
        self, batch: list[tuple[int, str, dict[str, Any]]], *, more: bool, abrupt: bool
    ) -> AsyncIterator[str]:
        yield ": ping\n\n"
        for event_id, event_type, data in batch:
            # The name and the data go out as separate writes on purpose.
            yield f"id: {event_id}\r\nevent: {event_type}\r\n"
            yield f"data: {json.dumps(data)}\r\n\r\n"
        if not more:
            await anyio.sleep_forever()  # nothing left: hold the stream open
        if abrupt:
            raise Dropped


def serve(gateway: FakeGateway) -> Iterator[FakeGateway]:
    with uvicorn_thread(gateway.app(), lifespan="off", start_timeout=10) as url:
        gateway.url = url
        yield gateway


@pytest.fixture
def gateway() -> Iterator[FakeGateway]:
    yield from serve(FakeGateway())


@pytest.fixture
def flaky_gateway() -> Iterator[FakeGateway]:
    yield from serve(FakeGateway(fail_first=1, overlap=1))


def agent_client(url: str, key: str = "am_agent_good") -> AsyncClient:
    config = ClientConfig(url=url, key=key, agent_name="claude")
    return AsyncClient(config, reconnect_initial=0.01, reconnect_cap=0.05)


async def collect(client: AsyncClient, count: int, last_event_id: int | None = None) -> list[Event]:
    received: list[Event] = []
    with anyio.fail_after(15):
        async with aclosing(client.events(last_event_id)) as stream:
            async for event in stream:
                received.append(event)
                if len(received) == count:
                    break
    return received


def as_tuples(events: list[Event]) -> list[tuple[int | None, str, dict[str, Any]]]:
    return [(event.id, event.type, event.data) for event in events]


@pytest.mark.anyio
async def test_every_event_arrives_once_in_order_across_dropped_connections(
    gateway: FakeGateway,
) -> None:
    async with agent_client(gateway.url) as client:
        received = await collect(client, len(EVENTS))

    assert as_tuples(received) == EVENTS
    assert [r["last_event_id"] for r in gateway.requests] == [None, "2", "4", "6"]
    assert {r["authorization"] for r in gateway.requests} == {"Bearer am_agent_good"}
    assert {r["agent"] for r in gateway.requests} == {"claude"}
    assert {r["accept"] for r in gateway.requests} == {"text/event-stream"}


@pytest.mark.anyio
async def test_the_stream_resumes_after_the_id_the_caller_already_has(
    gateway: FakeGateway,
) -> None:
    async with agent_client(gateway.url) as client:
        received = await collect(client, 4, last_event_id=3)

    assert as_tuples(received) == EVENTS[3:]
    assert [r["last_event_id"] for r in gateway.requests] == ["3", "5"]


@pytest.mark.anyio
async def test_a_503_is_retried_and_events_a_server_replays_twice_come_out_once(
    flaky_gateway: FakeGateway,
) -> None:
    async with agent_client(flaky_gateway.url) as client:
        received = await collect(client, len(EVENTS))

    assert as_tuples(received) == EVENTS
    assert flaky_gateway.requests[0]["last_event_id"] is None  # the 503
    assert flaky_gateway.requests[1]["last_event_id"] is None


@pytest.mark.anyio
async def test_a_revoked_key_raises_a_permanent_error_and_is_never_retried(
    gateway: FakeGateway,
) -> None:
    async with agent_client(gateway.url, key=REVOKED) as client:
        with anyio.fail_after(15), pytest.raises(ApiError) as raised:
            async with aclosing(client.events()) as stream:
                async for _ in stream:
                    pass

    assert raised.value.status == 401
    assert raised.value.code == "unauthorized"
    assert raised.value.message == "this key was revoked"
    assert raised.value.permanent is True
    assert len(gateway.requests) == 1
