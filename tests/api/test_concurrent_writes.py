"""Concurrent writers, on SQLite and on PostgreSQL (docs/postgres.md): a relay key
used by several requests at once stores one mail (or request) and answers the
others `duplicate_relay`, never a 500; concurrent first mails with one subject
get distinct aliases (a conditional write); event ids become visible in order."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.db.engine import Database
from mailui4agents.events import log
from mailui4agents.settings import Settings
from tests.conftest import Api

pytestmark = pytest.mark.anyio

AT_ONCE = 12


async def all_at_once(make: Any, n: int = AT_ONCE) -> list[httpx.Response]:
    out: list[httpx.Response] = []

    async def one() -> None:
        out.append(await make())

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return out


@pytest.fixture
async def pair(api: Api) -> Api:
    await api.user("ana")
    await api.agent("claude")
    return api


async def test_one_relay_key_sent_at_once_stores_one_mail(pair: Api) -> None:
    answers = await all_at_once(
        lambda: pair.send("claude", ["ana@/srv/shop"], subject="s", relay_key="same-key")
    )
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * (AT_ONCE - 1) + [201], [r.text for r in answers]
    [created] = [r.json() for r in answers if r.status_code == 201]
    dups = [r.json() for r in answers if r.status_code == 200]
    assert all(d == {"status": "duplicate_relay", "mail_id": created["id"]} for d in dups)
    inbox = await pair.http.get("/api/v1/mailbox", headers=pair.auth("ana"))
    assert [m["id"] for m in inbox.json()["items"]] == [created["id"]]


async def test_one_relay_key_asked_at_once_opens_one_request(pair: Api) -> None:
    first = await pair.send("ana", ["claude@/srv/shop.new"], subject="work")
    sid = first.json()["session_id"]
    answers = await all_at_once(
        lambda: pair.http.post(
            "/api/v1/agent/permissions",
            json={
                "session_id": sid,
                "kind": "approval",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "relay_key": "ask-1",
            },
            headers=pair.auth("claude"),
        )
    )
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * (AT_ONCE - 1) + [201], [r.text for r in answers]
    [created] = [r.json() for r in answers if r.status_code == 201]
    assert {r.json()["request_id"] for r in answers if r.status_code == 200} == {created["id"]}


async def test_first_mails_at_once_with_one_subject_get_distinct_aliases(pair: Api) -> None:
    answers = await all_at_once(
        lambda: pair.send("ana", ["claude@/srv/shop.new"], subject="Fix login bug"), n=8
    )
    assert [r.status_code for r in answers] == [201] * 8, [r.text for r in answers]
    aliases = {r.json()["session_alias"] for r in answers}
    assert len(aliases) == 8
    assert "claude-fix-login-bug" in aliases


async def test_an_event_id_never_becomes_visible_before_an_earlier_one(
    settings: Settings, api: Api
) -> None:
    """Writer A appends (its id drawn) and stays open; writer B appends and tries to
    commit. A reader must not see B's id while A's smaller id is still to come,
    or it would move its cursor past A's event for good. On PostgreSQL B waits
    for A (the event lock); on SQLite B waits for the one writer.

    B is given 1.5 s to commit while A is open: the absence of a commit has no
    event to wait on, so this one wait is a deadline."""
    del api  # the gateway's migrations and admin; this test talks to the database
    db = Database(settings.resolved_database_url())
    try:
        async with db.read() as s:
            head = await log.last_id(s)
        a_open, a_release = anyio.Event(), anyio.Event()
        b_done = anyio.Event()

        async def writer_a() -> None:
            async with db.write() as s:
                await log.append(s, ["user:ana"], "test", {"w": "a"})
                await s.flush()
                a_open.set()
                await a_release.wait()

        async def writer_b() -> None:
            await a_open.wait()
            async with db.write() as s:
                await log.append(s, ["user:ana"], "test", {"w": "b"})
            b_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer_a)
            tg.start_soon(writer_b)
            await a_open.wait()
            with anyio.move_on_after(1.5):
                await b_done.wait()
            async with db.read() as s:
                seen = [e.frame for e in await log.after_all(s, head, 10)]
            a_release.set()
        assert seen == [], f"visible while an earlier id was still open: {seen}"
        async with db.read() as s:
            rows = await log.after_all(s, head, 10)
        assert [r.principal for r in rows] == ["user:ana", "user:ana"]
        assert b'"w": "a"' in rows[0].frame and b'"w": "b"' in rows[1].frame
    finally:
        await db.dispose()
