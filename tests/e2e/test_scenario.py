"""The foundation scenario against a real `agentmail serve` subprocess, on SQLite
and on PostgreSQL (the `live_backend` parameter, tests/conftest.py)."""

from __future__ import annotations

import anyio
import pytest

from tests.conftest import Api
from tests.sse import Got, collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.live_both_backends]


async def test_human_mails_agent_and_agent_replies_in_the_same_session(live: Api) -> None:
    await live.agent("claude")
    await live.user("ana")
    sent: dict[str, object] = {}

    async def ana_sends() -> None:
        r = await live.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug", body="500s")
        assert r.status_code == 201, r.text
        sent.update(r.json())

    events = await collect(
        live.http,
        "/api/v1/agent/events",
        live.tokens["claude"],
        on_open=ana_sends,
        until=lambda got: len(got) >= 1,
    )
    [ev] = events
    assert ev.type == "new_mail"
    assert ev.data["session_alias"] == "claude-fix-login-bug"
    assert ev.data["from_human"] is True
    assert ev.data["reply_address"] == "ana@/srv/shop.claude-fix-login-bug"
    assert ev.data["self_address"] == "claude@/srv/shop.claude-fix-login-bug"
    assert ev.data["mail_id"] == sent["id"]

    reply: dict[str, object] = {}

    async def claude_replies() -> None:
        r = await live.send(
            "claude",
            [str(ev.data["reply_address"])],
            subject="Re: Fix login bug",
            body="Fixed in abc123",
            parent_mail_id=ev.data["mail_id"],
        )
        assert r.status_code == 201, r.text
        reply.update(r.json())

    ana_events: list[Got] = await collect(
        live.http,
        "/api/v1/events",
        live.tokens["ana"],
        on_open=claude_replies,
        until=lambda got: len(got) >= 1,
    )
    assert reply["session_id"] == ev.data["session_id"]
    [got] = ana_events
    assert got.type == "new_mail"
    assert got.data["mail_id"] == reply["id"]
    assert got.data["session_id"] == ev.data["session_id"]
    assert got.data["from_human"] is False
    assert got.data["in_reply_to"] == sent["id"]
    assert got.data["reply_address"] == "claude@/srv/shop.claude-fix-login-bug"


async def test_every_open_stream_of_one_agent_receives_the_event(live: Api) -> None:
    await live.agent("claude")
    await live.user("ana")
    opened = anyio.Event()
    results: list[list[Got]] = []

    async def listen(signal: bool) -> None:
        async def mark() -> None:
            if signal:
                opened.set()

        results.append(
            await collect(
                live.http,
                "/api/v1/agent/events",
                live.tokens["claude"],
                on_open=mark,
                until=lambda got: len(got) >= 1,
            )
        )

    async with anyio.create_task_group() as tg:
        # Open one stream, wait until it is open, then a second one whose on_open sends.
        tg.start_soon(listen, True)
        await opened.wait()

        async def second() -> None:
            async def send() -> None:
                r = await live.send("ana", ["claude@/srv/shop.new"], subject="Fan out")
                assert r.status_code == 201

            results.append(
                await collect(
                    live.http,
                    "/api/v1/agent/events",
                    live.tokens["claude"],
                    on_open=send,
                    until=lambda got: len(got) >= 1,
                )
            )

        tg.start_soon(second)
    assert len(results) == 2
    assert results[0][0].data["mail_id"] == results[1][0].data["mail_id"]
