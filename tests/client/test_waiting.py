"""The one ask-and-wait protocol (client/waiting.py) against a scripted client:
the safety nets that a live gateway rarely exercises — the read-back on a
reconnect and the final check at the deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from mailui4agents.client import AsyncClient, waiting
from mailui4agents.client.errors import ApiError
from mailui4agents.client.models import Event
from mailui4agents.wire.models import PermissionOut

pytestmark = pytest.mark.anyio

KEY = "k-1"


class Scripted:
    """Just what Asker uses: ``events`` and ``get_permission``."""

    def __init__(self, script: list[Event | str], status: list[dict[str, Any] | ApiError]) -> None:
        self.script = script  # events, or "connect" for a (re)connection
        self.status = status  # successive answers of get_permission
        self.reads = 0
        self.done = anyio.Event()

    async def events(
        self,
        on_connect: Callable[[], None] | None = None,
        on_retry: Callable[[ApiError | None, float], None] | None = None,
    ) -> AsyncIterator[Event]:
        for step in self.script:
            if step == "connect":
                assert on_connect is not None
                on_connect()
                await anyio.lowlevel.checkpoint()
            else:
                assert isinstance(step, Event)
                yield step
        await self.done.wait()  # then the stream stays open, silent

    async def get_permission(self, request_id: str, wait: float = 0) -> PermissionOut:
        answer = self.status[min(self.reads, len(self.status) - 1)]
        self.reads += 1
        if isinstance(answer, ApiError):
            raise answer
        return permission(**answer)


def permission(**fields: Any) -> PermissionOut:
    """A PermissionOut, as the typed client answers (the fields given, over a pending one)."""
    base = {"id": "r-1", "session_id": "s-1", "kind": "approval", "agent": "claude",
            "status": "pending", "created_at": "2026-12-01T12:00:00Z"}  # fmt: skip
    return PermissionOut.model_validate({**base, **fields})


def decision(request_id: str, what: str = "approve") -> Event:
    return Event(
        id=1, type="permission_decision", data={"request_id": request_id, "decision": what}
    )


async def ask(client: Scripted, *, within: float = 5.0) -> waiting.Outcome:
    async def post(_left: float) -> PermissionOut:
        return permission()

    deadline = anyio.current_time() + within
    return await waiting.ask_and_wait(cast(AsyncClient, client), post, KEY, deadline)


async def test_only_its_own_decision_counts() -> None:
    client = Scripted(["connect", decision("someone-else"), decision("r-1", "deny")], [{}])
    result = await ask(client)
    assert result == waiting.Decided({"request_id": "r-1", "decision": "deny"})


async def test_a_reconnect_reads_the_request_back() -> None:
    # The decision was pushed while the stream was down: the read-back on the
    # reconnect sees it at once, long before the final check at the deadline.
    closed = {"id": "r-1", "status": "approved", "decision": "approve"}
    client = Scripted(["connect", "connect"], [closed])
    with anyio.fail_after(10):
        result = await ask(client, within=60)
    assert result == waiting.Decided(closed)
    assert client.reads == 1


async def test_the_final_check_finds_a_decision_the_stream_missed() -> None:
    closed = {"id": "r-1", "status": "denied", "decision": "deny"}
    client = Scripted(["connect"], [closed])
    assert await ask(client, within=0.2) == waiting.Decided(closed)


async def test_nobody_deciding_is_a_timeout_not_a_decision() -> None:
    client = Scripted(["connect"], [{"id": "r-1", "status": "pending"}])
    assert await ask(client, within=0.2) == waiting.TimedOut("wait")


async def test_a_gateway_gone_at_the_deadline_is_a_timeout_that_says_so() -> None:
    gone = ApiError(None, "unreachable", "connection refused")
    client = Scripted(["connect"], [gone])
    result = await ask(client, within=0.2)
    assert result == waiting.TimedOut("wait", gone)


async def test_nothing_is_posted_before_the_stream_is_open() -> None:
    posted: list[float] = []

    async def post(left: float) -> PermissionOut:
        posted.append(left)
        return permission()

    client = Scripted([], [{}])  # never connects
    deadline = anyio.current_time() + 0.3
    refused = await waiting.ask_and_wait(cast(AsyncClient, client), post, KEY, deadline)
    assert isinstance(refused, waiting.Failed) and refused.stage == "stream"
    assert posted == []
