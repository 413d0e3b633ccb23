"""Calendar: scheduling, validation, access on every side, delivery driven by an
injected clock (services/scheduler.deliver_calendar(gw, now)), exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from mailui4agents.services import scheduler
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, Api, snapshot, started_app

pytestmark = pytest.mark.anyio

CAL = "/api/v1/calendar"
AGENT_CAL = "/api/v1/agent/calendar"


class Cal:
    def __init__(self, api: Api, gw: Gateway) -> None:
        self.api, self.gw = api, gw

    def path(self, who: str) -> str:
        return CAL if self.api.tokens[who].startswith("am_user_") else AGENT_CAL

    async def create(self, who: str, **body: Any) -> httpx.Response:
        body.setdefault("to", ["claude@/srv/shop"])
        body.setdefault("subject", "standup")
        body.setdefault("body", "what did you do yesterday?")
        return await self.api.http.post(self.path(who), json=body, headers=self.api.auth(who))

    async def ok(self, who: str, **body: Any) -> dict[str, Any]:
        r = await self.create(who, **body)
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out

    async def get(self, who: str, entry_id: str) -> httpx.Response:
        return await self.api.http.get(f"{self.path(who)}/{entry_id}", headers=self.api.auth(who))

    async def patch(self, who: str, entry_id: str, **body: Any) -> httpx.Response:
        return await self.api.http.patch(
            f"{self.path(who)}/{entry_id}", json=body, headers=self.api.auth(who)
        )

    async def cancel(self, who: str, entry_id: str) -> httpx.Response:
        return await self.api.http.post(
            f"{self.path(who)}/{entry_id}/cancel", headers=self.api.auth(who)
        )

    async def tick(self, now: datetime) -> int:
        return await scheduler.deliver_calendar(self.gw, now)

    async def inbox(self, agent: str = "claude") -> list[dict[str, Any]]:
        r = await self.api.http.get(
            "/api/v1/agent/inbox",
            params={"status": "all", "limit": 500},
            headers=self.api.auth(agent),
        )
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return [m for m in items if m["type"] == "calendar"]


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def soon(minutes: int = 60) -> datetime:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).replace(microsecond=0)


@snapshot
async def people(api: Api) -> dict[str, str]:
    """Users ana and bob, agents claude and gemini in /srv/shop: their tokens."""
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude", ["/srv/shop"])
    await api.agent("gemini", ["/srv/shop"])
    return dict(api.tokens)


@pytest.fixture
async def cal(settings: Settings, people: dict[str, str]) -> AsyncIterator[Cal]:
    # A long scheduler interval: the app's own loop runs once at start and then
    # stays out of the way; the tests drive delivery with their own clock.
    settings = settings.model_copy(update={"scheduler_interval_s": 3600.0})
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            yield Cal(Api(http, tokens=dict(people)), app.state.gateway)


# --- one-off, late, exactly once -----------------------------------------------------


async def test_a_one_off_entry_is_delivered_once_at_its_time(cal: Cal) -> None:
    at = soon()
    e = await cal.ok("ana", start_at=iso(at))
    assert e["status"] == "scheduled" and utc(e["next_due"]) == at
    assert [utc(u) for u in e["upcoming"]] == [at]

    assert await cal.tick(at - timedelta(seconds=1)) == 0  # not yet
    assert await cal.inbox() == []
    assert await cal.tick(at) == 1
    assert await cal.tick(at + timedelta(seconds=5)) == 0  # never twice

    mails = await cal.inbox()
    assert len(mails) == 1
    assert mails[0]["subject"] == "standup" and mails[0]["from"].split("@")[0] == "ana"
    assert mails[0]["from_human"] is True
    got = (await cal.get("ana", e["id"])).json()
    assert got["status"] == "done" and got["next_due"] is None and got["delivered"] == 1
    [occ] = got["occurrences"]
    assert occ["late"] is False and occ["mail_id"] == mails[0]["id"]
    assert utc(occ["due_at"]) == at


async def test_an_occurrence_delivered_long_after_its_time_is_marked_late(cal: Cal) -> None:
    at = soon()
    e = await cal.ok("ana", start_at=iso(at))
    assert await cal.tick(at + timedelta(hours=2)) == 1
    [mail] = await cal.inbox()
    assert "delivered late" in mail["body"] and "was not running" in mail["body"]
    [occ] = (await cal.get("ana", e["id"])).json()["occurrences"]
    assert occ["late"] is True and utc(occ["due_at"]) == at


async def test_a_start_without_offset_is_wall_clock_time_in_its_zone(cal: Cal) -> None:
    e = await cal.ok("ana", start_at="2027-07-01T09:00", timezone="Europe/Berlin")
    assert e["start_at"] == "2027-07-01T09:00:00+02:00"
    assert utc(e["next_due"]) == datetime(2027, 7, 1, 7, 0, tzinfo=UTC)


# --- recurrence across a DST change --------------------------------------------------


async def test_daily_nine_o_clock_in_berlin_moves_by_an_hour_in_utc_across_dst(cal: Cal) -> None:
    # The last Sunday of March 2027 is the 28th: Berlin goes from UTC+1 to UTC+2.
    e = await cal.ok(
        "ana", start_at="2027-03-26T09:00", timezone="Europe/Berlin", rrule="FREQ=DAILY;COUNT=4"
    )
    expected = [
        datetime(2027, 3, 26, 8, 0, tzinfo=UTC),
        datetime(2027, 3, 27, 8, 0, tzinfo=UTC),
        datetime(2027, 3, 28, 7, 0, tzinfo=UTC),
        datetime(2027, 3, 29, 7, 0, tzinfo=UTC),
    ]
    assert [utc(u) for u in e["upcoming"]] == expected
    for at in expected:
        assert await cal.tick(at - timedelta(seconds=1)) == 0
        assert await cal.tick(at) == 1
    got = (await cal.get("ana", e["id"])).json()
    assert got["status"] == "done" and got["delivered"] == 4
    assert sorted(utc(o["due_at"]) for o in got["occurrences"]) == expected
    assert not any(o["late"] for o in got["occurrences"])
    assert len(await cal.inbox()) == 4


async def test_a_gateway_behind_by_three_occurrences_delivers_each_once_late(cal: Cal) -> None:
    e = await cal.ok("ana", start_at=iso(soon()), rrule="FREQ=DAILY")
    first = utc(e["next_due"])
    assert await cal.tick(first + timedelta(days=2, hours=1)) == 3
    assert await cal.tick(first + timedelta(days=2, hours=1)) == 0
    got = (await cal.get("ana", e["id"])).json()
    assert got["status"] == "scheduled" and utc(got["next_due"]) == first + timedelta(days=3)
    assert [o["late"] for o in got["occurrences"]] == [True, True, True]
    assert len(await cal.inbox()) == 3


# --- cancel and edit -----------------------------------------------------------------


async def test_a_cancelled_entry_is_never_delivered(cal: Cal) -> None:
    at = soon()
    e = await cal.ok("ana", start_at=iso(at))
    r = await cal.cancel("ana", e["id"])
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert (await cal.cancel("ana", e["id"])).status_code == 200  # idempotent
    assert await cal.tick(at + timedelta(minutes=1)) == 0
    assert await cal.inbox() == []
    r = await cal.patch("ana", e["id"], subject="again")
    assert r.status_code == 409  # cancelled is final


async def test_cancel_by_patch_and_done_is_final(cal: Cal) -> None:
    at = soon()
    e = await cal.ok("ana", start_at=iso(at))
    r = await cal.patch("ana", e["id"], status="cancelled")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    e2 = await cal.ok("ana", start_at=iso(at))
    assert await cal.tick(at) == 1
    assert (await cal.cancel("ana", e2["id"])).status_code == 409
    assert (await cal.patch("ana", e2["id"], body="x")).status_code == 409


async def test_an_edit_moves_the_time_and_changes_what_is_sent(cal: Cal) -> None:
    at = soon()
    e = await cal.ok("ana", start_at=iso(at))
    later = at + timedelta(hours=1)
    r = await cal.patch(
        "ana", e["id"], start_at=iso(later), subject="moved", to=["gemini@/srv/shop"]
    )
    assert r.status_code == 200, r.text
    assert utc(r.json()["next_due"]) == later and r.json()["to"] == ["gemini@/srv/shop"]
    assert await cal.tick(at) == 0  # the old time is gone
    assert await cal.tick(later) == 1
    assert await cal.inbox("claude") == []
    [mail] = await cal.inbox("gemini")
    assert mail["subject"] == "moved"


async def test_editing_a_recurring_entry_never_repeats_a_delivered_occurrence(cal: Cal) -> None:
    e = await cal.ok("ana", start_at=iso(soon(2)), rrule="FREQ=HOURLY;COUNT=3")
    first = utc(e["next_due"])
    assert await cal.tick(first) == 1
    r = await cal.patch("ana", e["id"], subject="edited")  # within the minute of slack
    assert r.status_code == 200, r.text
    assert utc(r.json()["next_due"]) == first + timedelta(hours=1)
    assert await cal.tick(first + timedelta(seconds=30)) == 0


async def test_patching_rrule_to_null_makes_a_recurring_entry_one_off(cal: Cal) -> None:
    e = await cal.ok("ana", start_at=iso(soon()), rrule="FREQ=DAILY")
    assert len(e["upcoming"]) == 5
    r = await cal.patch("ana", e["id"], rrule=None)
    assert r.status_code == 200 and r.json()["rrule"] is None and len(r.json()["upcoming"]) == 1


async def test_list_shows_upcoming_first_and_filters_by_status(cal: Cal) -> None:
    a = await cal.ok("ana", start_at=iso(soon(120)))
    b = await cal.ok("ana", start_at=iso(soon(60)))
    c = await cal.ok("ana", start_at=iso(soon(90)))
    await cal.cancel("ana", c["id"])
    r = await cal.api.http.get(CAL, headers=cal.api.auth("ana"))
    assert [i["id"] for i in r.json()["items"]] == [b["id"], a["id"], c["id"]]
    r = await cal.api.http.get(CAL, params={"status": "cancelled"}, headers=cal.api.auth("ana"))
    assert [i["id"] for i in r.json()["items"]] == [c["id"]]
    r = await cal.api.http.get(CAL, params={"limit": 2}, headers=cal.api.auth("ana"))
    assert len(r.json()["items"]) == 2 and r.json()["next_cursor"] == "2"
    r = await cal.api.http.get(CAL, params={"limit": 2, "cursor": "2"}, headers=cal.api.auth("ana"))
    assert [i["id"] for i in r.json()["items"]] == [c["id"]]


# --- validation: a clear 4xx naming the field, nothing written -----------------------


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"timezone": "Mars/Olympus"}, 400, "timezone"),
        ({"timezone": "../../etc/passwd"}, 400, "timezone"),
        ({"rrule": "FREQ=SOMETIMES"}, 400, "rrule"),
        ({"rrule": "FREQ=SECONDLY"}, 400, "rrule"),
        ({"rrule": "FREQ=MINUTELY"}, 400, "rrule"),  # 500k occurrences a year
        ({"rrule": "FREQ=DAILY\nEXDATE:20270101T000000"}, 400, "rrule"),
        ({"rrule": "FREQ=DAILY;" + "BYHOUR=1;" * 100}, 400, "rrule"),
        ({"start_at": "tomorrow at nine"}, 400, "start_at"),
        ({"start_at": "2020-01-01T09:00:00Z"}, 400, "start_at"),
        ({"start_at": "2099-01-01T09:00:00Z"}, 400, "start_at"),
        ({"to": ["nobody"]}, 400, "to[0]"),
        ({"to": []}, 400, "to"),
        ({"subject": "x" * 5000}, 413, "subject"),
        ({"attachment_ids": ["00000000-0000-0000-0000-000000000000"]}, 400, "attachment_ids[0]"),
        ({"attachment_ids": ["not-a-uuid"]}, 400, "attachment_ids[0]"),
        ({"permission_mode": "root"}, 400, "permission_mode"),
        ({"from_session_id": "00000000-0000-0000-0000-000000000000"}, 400, "from_session_id"),
        ({"start_at": 1234}, 400, "start_at"),
        ({"when": "soon"}, 400, "when"),
    ],
)
async def test_bad_input_is_refused_naming_the_field(
    cal: Cal, body: dict[str, Any], status: int, field: str
) -> None:
    body.setdefault("start_at", iso(soon()))
    r = await cal.create("ana", **body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field
    r = await cal.api.http.get(CAL, headers=cal.api.auth("ana"))
    assert r.json()["items"] == []  # nothing half-written


async def test_an_update_is_validated_like_a_create(cal: Cal) -> None:
    e = await cal.ok("ana", start_at=iso(soon()))
    for body, field in (
        ({"timezone": "Nowhere/Land"}, "timezone"),
        ({"rrule": "FREQ=SECONDLY"}, "rrule"),
        ({"start_at": "2020-01-01T00:00:00Z"}, "start_at"),
        ({"to": ["nobody"]}, "to[0]"),
        ({"status": "done"}, "status"),
        ({"status": "failed"}, "status"),
        ({"colour": "red"}, "colour"),
    ):
        r = await cal.patch("ana", e["id"], **body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["field"] == field
    got = (await cal.get("ana", e["id"])).json()
    assert got["to"] == ["claude@/srv/shop"] and got["timezone"] == "UTC"  # unchanged


async def test_an_agent_may_not_choose_a_permission_mode(cal: Cal) -> None:
    r = await cal.create(
        "claude", to=["ana@/srv/shop"], start_at=iso(soon()), permission_mode="full"
    )
    assert r.status_code == 400 and r.json()["error"]["field"] == "permission_mode"


async def test_scheduled_entries_per_creator_are_capped(settings: Settings) -> None:
    settings = settings.model_copy(update={"calendar_max_entries": 2})
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            await a.agent("claude", ["/srv/shop"])
            c = Cal(a, app.state.gateway)
            first = await c.ok("admin", start_at=iso(soon()))
            await c.ok("admin", start_at=iso(soon()))
            r = await c.create("admin", start_at=iso(soon()))
            assert r.status_code == 409 and r.json()["error"]["code"] == "too_many_entries"
            await c.cancel("admin", first["id"])  # a cancelled entry frees its place
            await c.ok("admin", start_at=iso(soon()))


# --- access: every side --------------------------------------------------------------


async def test_anonymous_callers_get_401(cal: Cal) -> None:
    for method, path in (("GET", CAL), ("POST", CAL), ("GET", AGENT_CAL)):
        r = await cal.api.http.request(method, path, json={})
        assert r.status_code == 401, (method, path)


async def test_agents_and_humans_each_use_their_own_routes(cal: Cal) -> None:
    h = cal.api.auth
    assert (await cal.api.http.get(CAL, headers=h("claude"))).status_code == 403
    assert (await cal.api.http.get(AGENT_CAL, headers=h("ana"))).status_code == 403


async def test_only_the_creator_and_admins_see_an_entry(cal: Cal) -> None:
    e = await cal.ok("ana", start_at=iso(soon()))
    eid = e["id"]
    # the owner
    assert (await cal.get("ana", eid)).status_code == 200
    assert (await cal.patch("ana", eid, subject="mine")).status_code == 200
    # another human: as if it did not exist
    assert (await cal.get("bob", eid)).status_code == 404
    assert (await cal.patch("bob", eid, subject="x")).status_code == 404
    assert (await cal.cancel("bob", eid)).status_code == 404
    bobs = await cal.api.http.get(CAL, headers=cal.api.auth("bob"))
    assert bobs.json()["items"] == []
    assert (
        await cal.api.http.get(CAL, params={"everyone": "true"}, headers=cal.api.auth("bob"))
    ).status_code == 400
    # an agent, even the recipient
    assert (await cal.get("claude", eid)).status_code == 404
    assert (await cal.cancel("claude", eid)).status_code == 404
    # an admin sees it and may cancel it, but never edits it (docs/access.md)
    assert (await cal.get("admin", eid)).status_code == 200
    everyone = await cal.api.http.get(
        CAL, params={"everyone": "true"}, headers=cal.api.auth("admin")
    )
    assert [i["id"] for i in everyone.json()["items"]] == [eid]
    own = await cal.api.http.get(CAL, headers=cal.api.auth("admin"))
    assert own.json()["items"] == []
    assert (await cal.patch("admin", eid, subject="admin's words")).status_code == 403
    assert (await cal.get("ana", eid)).json()["subject"] == "mine"
    assert (await cal.cancel("admin", eid)).status_code == 200
    assert (await cal.get("ana", eid)).json()["status"] == "cancelled"


async def test_an_agents_entry_is_its_own_and_is_sent_as_the_agent(cal: Cal) -> None:
    at = soon()
    # claude sets gemini to work from the session ana started with it (docs/access.md).
    work = await cal.api.send("ana", ["claude@/srv/shop.new"], subject="work")
    assert work.status_code == 201, work.text
    e = await cal.ok(
        "claude",
        to=["gemini@/srv/shop"],
        start_at=iso(at),
        from_session_id=work.json()["session_id"],
    )
    assert e["created_by"] == "claude"
    assert (await cal.get("claude", e["id"])).status_code == 200
    assert (await cal.get("gemini", e["id"])).status_code == 404  # another agent
    assert (await cal.patch("gemini", e["id"], subject="x")).status_code == 404
    assert (await cal.cancel("gemini", e["id"])).status_code == 404
    assert (await cal.get("ana", e["id"])).status_code == 404  # a human
    assert (await cal.get("admin", e["id"])).status_code == 200
    assert await cal.tick(at) == 1
    [mail] = await cal.inbox("gemini")
    assert mail["from"].split("@")[0] == "claude" and mail["from_human"] is False


async def test_an_agent_over_its_budget_gets_a_failed_entry_not_a_mail(settings: Settings) -> None:
    # The budget counts an agent's sends in one session; a scheduled reply into a
    # session where the agent used it up is refused at delivery and says why.
    settings = settings.model_copy(update={"send_budget": 1, "scheduler_interval_s": 3600.0})
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            await a.user("ana")
            await a.agent("claude", ["/srv/shop"])
            await a.agent("gemini", ["/srv/shop"])
            c = Cal(a, app.state.gateway)
            work = await a.send("ana", ["claude@/srv/shop.new"], subject="work")
            first = await a.send(
                "claude",
                ["gemini@/srv/shop"],
                subject="plan",
                from_session_id=work.json()["session_id"],
            )
            assert first.status_code == 201, first.text
            there = f"gemini@/srv/shop.{first.json()['session_alias']}"
            r = await a.send("claude", [there], subject="Re: plan")
            assert r.status_code == 409  # the budget is spent in that session
            at = soon()
            e = await c.ok(
                "claude",
                to=[there],
                subject="Re: plan",
                start_at=iso(at),
                from_session_id=first.json()["session_id"],
            )
            assert await c.tick(at) == 0
            got = (await c.get("claude", e["id"])).json()
            assert got["status"] == "failed" and "budget" in got["last_error"]
            assert got["delivered"] == 0
            assert got["occurrences"][0]["error"] == got["last_error"]
            assert len(await c.inbox("gemini")) == 0


# --- attachments: sent with the mail, and held against the blob sweep ----------------


async def _upload(cal: Cal, who: str, content: bytes) -> str:
    r = await cal.api.http.post(
        "/api/v1/attachments",
        files={"file": ("plan.txt", content, "text/plain")},
        headers=cal.api.auth(who),
    )
    assert r.status_code == 201, r.text
    aid: str = r.json()["attachment_id"]
    return aid


async def test_attachments_of_a_live_entry_survive_the_sweep_and_are_sent(cal: Cal) -> None:
    held = await _upload(cal, "ana", b"the plan")
    loose = await _upload(cal, "ana", b"nobody needs this")
    at = soon()
    e = await cal.ok("ana", start_at=iso(at), attachment_ids=[held])
    assert [a["attachment_id"] for a in e["attachments"]] == [held]

    after_grace = datetime.now(UTC) + timedelta(days=3)
    result = await scheduler.sweep_blobs(cal.gw, after_grace)
    assert result.attachments == 1  # the loose upload only
    r = await cal.api.http.get(f"/api/v1/attachments/{loose}", headers=cal.api.auth("ana"))
    assert r.status_code == 404
    r = await cal.api.http.get(f"/api/v1/attachments/{held}", headers=cal.api.auth("ana"))
    assert r.status_code == 200 and r.content == b"the plan"

    assert await cal.tick(at) == 1
    [mail] = await cal.inbox()
    assert [a["attachment_id"] for a in mail["attachments"]] == [held]


async def test_a_cancelled_entry_lets_its_attachments_go(cal: Cal) -> None:
    aid = await _upload(cal, "ana", b"draft")
    e = await cal.ok("ana", start_at=iso(soon()), attachment_ids=[aid])
    await cal.cancel("ana", e["id"])
    result = await scheduler.sweep_blobs(cal.gw, datetime.now(UTC) + timedelta(days=3))
    assert result.attachments == 1 and result.blobs == 1
    assert (await cal.get("ana", e["id"])).json()["attachments"] == []


async def test_one_may_schedule_only_attachments_one_may_send(cal: Cal) -> None:
    bobs = await _upload(cal, "bob", b"bob's secret")
    r = await cal.create("ana", start_at=iso(soon()), attachment_ids=[bobs])
    assert r.status_code == 400 and r.json()["error"]["field"] == "attachment_ids[0]"
    mine = await _upload(cal, "ana", b"mine")
    e = await cal.ok("ana", start_at=iso(soon()))
    r = await cal.patch("ana", e["id"], attachment_ids=[mine, bobs])
    assert r.status_code == 400 and r.json()["error"]["field"] == "attachment_ids[1]"
    r = await cal.patch("ana", e["id"], attachment_ids=[mine])
    assert r.status_code == 200 and len(r.json()["attachments"]) == 1
