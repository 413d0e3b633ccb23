"""Calendar against real `agentmail serve` processes: a gateway that was down over
an entry's time delivers it once, late, after a restart; two gateways on one
SQLite file, both running the scheduler, deliver each due entry once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, Api
from tests.sse import Got, collect

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ENV = {
    "AGENTMAIL_ADMIN_PASSWORD": ADMIN_PASSWORD,
    "AGENTMAIL_SCHEDULER_INTERVAL_S": "0.05",  # many passes: processes race for claims
    "AGENTMAIL_CALENDAR_LATE_AFTER_S": "1",
    **FAST_HASH_ENV,
}


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def in_seconds(n: int) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=n + 1)).replace(microsecond=0)


async def until_clock_passes(at: datetime) -> None:
    """Wait for the wall clock itself: the condition is a time, no event exists."""
    delay = (at - datetime.now(UTC)).total_seconds()
    if delay > 0:
        await anyio.sleep(delay)


def calendar_mails(events: list[Got]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "new_mail" and e.data.get("type") == "calendar"]


async def inbox(a: Api, agent: str = "claude") -> list[dict[str, Any]]:
    r = await a.http.get(
        "/api/v1/agent/inbox", params={"status": "all", "limit": 500}, headers=a.auth(agent)
    )
    assert r.status_code == 200, r.text
    return [m for m in r.json()["items"] if m["type"] == "calendar"]


async def schedule(a: Api, at: datetime, subject: str) -> dict[str, Any]:
    r = await a.http.post(
        "/api/v1/calendar",
        json={"to": ["claude@/srv/shop"], "subject": subject, "body": "b", "start_at": iso(at)},
        headers=a.auth("ana"),
    )
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    """Gateway processes over one data dir; each test starts the ones it needs."""
    procs = [GatewayProcess(data_dir=tmp_path / "data", env=clean_env(**ENV)) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


async def _people(url: str) -> Api:
    a = Api(httpx.AsyncClient(base_url=url, timeout=30))
    await a.login("admin", ADMIN_PASSWORD)
    await a.user("ana")
    await a.agent("claude", ["/srv/shop"])
    return a


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
async def test_a_gateway_down_over_the_due_time_delivers_once_late_after_restart(
    gateways: list[GatewayProcess], how: str
) -> None:
    gp = gateways[0]
    gp.start()
    a = await _people(gp.url)
    due = in_seconds(4)
    entry = await schedule(a, due, "while you were out")
    await a.http.aclose()  # no open connection to hold a graceful shutdown up
    gp.kill() if how == "SIGKILL" else gp.stop()
    assert datetime.now(UTC) < due, "the gateway took too long to stop for this test"
    await until_clock_passes(due + timedelta(seconds=2))

    gp.start(port=gp.port)
    a.http = httpx.AsyncClient(base_url=gp.url, timeout=30)
    events = await collect(
        a.http,
        "/api/v1/agent/events",
        a.tokens["claude"],
        until=lambda got: len(calendar_mails(got)) >= 1,
        last_event_id=0,  # from the start of the log: the delivery may precede the stream
    )
    [mail] = calendar_mails(events)
    assert mail["subject"] == "while you were out"
    r = await a.http.get(f"/api/v1/calendar/{entry['id']}", headers=a.auth("ana"))
    got = r.json()
    assert got["status"] == "done" and got["delivered"] == 1
    [occ] = got["occurrences"]
    assert occ["late"] is True and occ["mail_id"] == mail["mail_id"]
    assert datetime.fromisoformat(occ["due_at"].replace("Z", "+00:00")) == due
    [full] = await inbox(a)
    assert "delivered late" in full["body"]

    # Crash and restart once more: nothing is delivered again. A new entry due at
    # once is the witness: the scheduler takes due entries oldest first, so a
    # repeat of the old one would arrive before it.
    gp.kill()
    gp.start(port=gp.port)
    await a.http.aclose()
    a.http = httpx.AsyncClient(base_url=gp.url, timeout=30)
    await schedule(a, datetime.now(UTC).replace(microsecond=0), "witness")
    await collect(
        a.http,
        "/api/v1/agent/events",
        a.tokens["claude"],
        until=lambda got: any(m["subject"] == "witness" for m in calendar_mails(got)),
        last_event_id=0,
    )
    assert sorted(m["subject"] for m in await inbox(a)) == ["while you were out", "witness"]
    await a.http.aclose()


ENTRIES = 20


async def test_two_gateways_on_one_sqlite_file_deliver_each_due_entry_once(
    gateways: list[GatewayProcess],
) -> None:
    one, two = gateways
    one.start()
    two.start()
    a = await _people(one.url)
    b = Api(httpx.AsyncClient(base_url=two.url, timeout=30), tokens=a.tokens)
    due = in_seconds(3)  # all at the same instant: both schedulers want every one
    ids = []
    for i in range(ENTRIES):
        ids.append((await schedule(a if i % 2 else b, due, f"m{i}"))["id"])

    started = time.monotonic()
    events = await collect(
        b.http,
        "/api/v1/agent/events",
        a.tokens["claude"],
        until=lambda got: len(calendar_mails(got)) >= ENTRIES,
        last_event_id=0,
    )
    subjects = sorted(m["subject"] for m in await inbox(a))
    assert subjects == sorted(f"m{i}" for i in range(ENTRIES))  # each exactly once
    assert len(calendar_mails(events)) == ENTRIES
    for eid in ids:
        got = (await a.http.get(f"/api/v1/calendar/{eid}", headers=a.auth("ana"))).json()
        assert got["status"] == "done" and got["delivered"] == 1 and len(got["occurrences"]) == 1
    # Both processes kept running the scheduler throughout.
    assert one.proc is not None and one.proc.poll() is None
    assert two.proc is not None and two.proc.poll() is None
    assert time.monotonic() - started < 30
    await a.http.aclose()
    await b.http.aclose()
