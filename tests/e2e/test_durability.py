"""Durability: whatever got a 2xx is stored, and every event replays exactly once,
even when the gateway is killed with SIGKILL in the middle of a burst."""

from __future__ import annotations

import asyncio
import sqlite3

import anyio
import httpx
import pytest

from mailui4agents.testing import GatewayProcess
from tests.conftest import ADMIN_PASSWORD, Api
from tests.sse import collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOTAL = 500
KILL_AFTER = 150


async def _setup(url: str) -> Api:
    http = httpx.AsyncClient(base_url=url, timeout=30)
    a = Api(http)
    await a.login("admin", ADMIN_PASSWORD)
    return a


async def burst_then_kill(gp: GatewayProcess, a: Api, to: list[str]) -> set[str]:
    """TOTAL mails from ana to `to`, 64 at a time; SIGKILL the gateway once
    KILL_AFTER are acknowledged; the ids acknowledged (201). Some sends must
    have failed (an error or no answer): the kill cut the burst short."""
    acked: set[str] = set()
    failed = 0
    enough = anyio.Event()
    limits = httpx.Limits(max_connections=64)

    async with httpx.AsyncClient(base_url=gp.url, timeout=30, limits=limits) as burst:

        async def send(i: int) -> None:
            nonlocal failed
            try:
                r = await burst.post(
                    "/api/v1/mail",
                    json={"to": to, "subject": f"m{i}", "body": str(i)},
                    headers=a.auth("ana"),
                )
            except httpx.HTTPError:
                failed += 1
                return
            if r.status_code == 201:
                acked.add(r.json()["id"])
                if len(acked) >= KILL_AFTER:
                    enough.set()
            else:
                failed += 1

        async def killer() -> None:
            await enough.wait()
            await asyncio.to_thread(gp.kill)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                for i in range(TOTAL):
                    tg.start_soon(send, i)
    await a.http.aclose()
    assert len(acked) >= KILL_AFTER
    assert failed > 0, "the kill should have cut the burst short"
    return acked


async def test_mails_acknowledged_before_sigkill_survive_and_replay_once(
    gateway_process: GatewayProcess,
) -> None:
    a = await _setup(gateway_process.url)
    await a.agent("claude")
    await a.user("ana")
    acked = await burst_then_kill(gateway_process, a, ["claude@/srv/shop"])

    gateway_process.start()  # same data dir, fresh process
    b = await _setup(gateway_process.url)
    b.tokens.update(a.tokens)
    try:
        for mail_id in acked:
            r = await b.http.get(f"/api/v1/mail/{mail_id}", headers=b.auth("ana"))
            assert r.status_code == 200, (mail_id, r.text)

        stored: list[str] = []
        cursor = None
        while True:
            params = {"status": "all", "limit": "500", **({"cursor": cursor} if cursor else {})}
            r = await b.http.get("/api/v1/agent/inbox", params=params, headers=b.auth("claude"))
            page = r.json()
            stored += [m["id"] for m in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert acked <= set(stored)

        events = await collect(
            b.http,
            "/api/v1/agent/events",
            b.tokens["claude"],
            last_event_id=0,
            until=lambda got: len(got) >= len(stored),
        )
        ids = [e.id for e in events]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        mail_ids = [e.data["mail_id"] for e in events]
        assert len(set(mail_ids)) == len(mail_ids), "an event was replayed twice"
        assert set(mail_ids) == set(stored)

        # Resuming from the middle gives exactly the rest, in order.
        middle = ids[len(ids) // 2]
        rest = await collect(
            b.http,
            "/api/v1/agent/events",
            b.tokens["claude"],
            last_event_id=middle,
            until=lambda got: len(got) >= len([i for i in ids if i > middle]),
        )
        assert [e.id for e in rest] == [i for i in ids if i > middle]
    finally:
        await b.http.aclose()


async def test_sigkill_amid_concurrent_writers_leaves_every_acked_mail_whole(
    gateway_process: GatewayProcess,
) -> None:
    """64 concurrent senders of 3-recipient mails, SIGKILLed after 150
    acknowledgements, so the kill lands among queued and committing writers.
    After restart every acknowledged mail is there, and no mail is half-written:
    each has its 3 recipients and exactly one `new_mail` event per recipient
    (read straight from the SQLite file)."""
    a = await _setup(gateway_process.url)
    for name in ("claude", "codex"):
        await a.agent(name)
    await a.user("ana")
    await a.user("bob")
    to = ["claude@/srv/shop", "codex@/srv/shop", "bob@/srv/shop"]
    acked = await burst_then_kill(gateway_process, a, to)

    gateway_process.start()  # recovers the WAL; then read the file as it is
    db = sqlite3.connect(gateway_process.data_dir / "agentmail.db")
    try:
        mails = {
            mail_id: (recipients, events)
            for mail_id, recipients, events in db.execute(
                "SELECT m.id,"
                " (SELECT count(*) FROM mail_recipients r WHERE r.mail_seq = m.seq),"
                " (SELECT count(*) FROM events e WHERE e.type = 'new_mail'"
                "  AND json_extract(e.data, '$.mail_id') = m.id)"
                " FROM mails m WHERE m.from_name = 'ana'"
            )
        }
    finally:
        db.close()
    assert acked <= set(mails), "an acknowledged mail was lost"
    assert {counts for counts in mails.values()} == {(3, 3)}, "a mail was half-written"
