"""GET/PUT /api/v1/me/notify-policy and POST /api/v1/me/presence from every side
(docs/remote.md, "Notification policy"): anonymous 401, agents 403, each person
only their own (no id in the path: admins too), partial updates, 400 naming the
field, a race of two first writes, the presence beacon's bounded writes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import anyio
import pytest

from mailui4agents.db.types import utcnow
from tests.conftest import Api

pytestmark = pytest.mark.anyio

POLICY = "/api/v1/me/notify-policy"
PRESENCE = "/api/v1/me/presence"
DEFAULTS = {
    "push": True,
    "email": True,
    "email_mail": True,
    "push_content": "preview",
    "skip_when_visible": True,
    "quiet_start": None,
    "quiet_end": None,
    "timezone": "UTC",
    "remind_after_min": None,
    "escalate_after_min": None,
    "email_digest_hour": None,
}


async def test_nobody_but_a_person_reaches_the_routes(api: Api) -> None:
    await api.agent("claude")
    for method, path, body in (
        ("GET", POLICY, None),
        ("PUT", POLICY, {"push": False}),
        ("POST", PRESENCE, {"visible": True}),
    ):
        anon = await api.http.request(method, path, json=body)
        assert anon.status_code == 401, (path, anon.text)
        agent = await api.http.request(method, path, json=body, headers=api.auth("claude"))
        assert agent.status_code == 403, (path, agent.text)
    # negative control: a person's token passes
    assert (await api.http.get(POLICY, headers=api.auth("admin"))).status_code == 200


async def test_each_person_reads_and_changes_only_their_own(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    got = await api.http.get(POLICY, headers=api.auth("ana"))
    assert got.status_code == 200 and got.json() == DEFAULTS
    put = await api.http.put(
        POLICY,
        json={"quiet_start": "22:00", "quiet_end": "07:00", "timezone": "Europe/Madrid"},
        headers=api.auth("ana"),
    )
    assert put.status_code == 200, put.text
    mine = {**DEFAULTS, "quiet_start": "22:00", "quiet_end": "07:00", "timezone": "Europe/Madrid"}
    assert put.json() == mine
    # A partial update keeps the rest.
    put = await api.http.put(POLICY, json={"remind_after_min": 15}, headers=api.auth("ana"))
    assert put.json() == {**mine, "remind_after_min": 15}
    assert (await api.http.get(POLICY, headers=api.auth("ana"))).json() == {
        **mine,
        "remind_after_min": 15,
    }
    # bob and the admin still have the defaults: ana's change is hers alone.
    assert (await api.http.get(POLICY, headers=api.auth("bob"))).json() == DEFAULTS
    assert (await api.http.get(POLICY, headers=api.auth("admin"))).json() == DEFAULTS
    # There is no way to name someone else: no id in the path, no such field.
    other = await api.http.put(
        POLICY, json={"user": "ana", "push": False}, headers=api.auth("admin")
    )
    assert other.status_code == 400 and other.json()["error"]["field"] == "user"
    assert (await api.http.get(f"{POLICY}/ana", headers=api.auth("admin"))).status_code in (
        404,
        405,
    )
    # The admin's own change is the admin's.
    await api.http.put(POLICY, json={"push": False}, headers=api.auth("admin"))
    assert (await api.http.get(POLICY, headers=api.auth("ana"))).json()["push"] is True
    # null switches a reminder or quiet hours off.
    off = await api.http.put(
        POLICY,
        json={"quiet_start": None, "quiet_end": None, "remind_after_min": None},
        headers=api.auth("ana"),
    )
    assert off.json() == {**DEFAULTS, "timezone": "Europe/Madrid"}


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"quiet_start": "25:00", "quiet_end": "07:00"}, "quiet_start", "invalid_value"),
        ({"quiet_start": "22:00"}, "quiet_end", "invalid_value"),
        ({"quiet_start": "22:00", "quiet_end": "22:00"}, "quiet_end", "invalid_value"),
        ({"quiet_start": "22:00:00", "quiet_end": "07:00"}, "quiet_start", "invalid_value"),
        ({"timezone": "Mars/Olympus"}, "timezone", "invalid_value"),
        ({"timezone": "x" * 65}, "timezone", "invalid_value"),
        ({"remind_after_min": 0}, "remind_after_min", "invalid_value"),
        ({"escalate_after_min": 1441}, "escalate_after_min", "invalid_value"),
        ({"escalate_after_min": "10"}, "escalate_after_min", "invalid_type"),
        ({"push_content": "full"}, "push_content", "invalid_value"),
        ({"email_digest_hour": 24}, "email_digest_hour", "invalid_value"),
        ({"email_digest_hour": -1}, "email_digest_hour", "invalid_value"),
        ({"email_digest_hour": "7"}, "email_digest_hour", "invalid_type"),
        ({"push": "yes"}, "push", "invalid_type"),
        ({"push": None}, "push", "invalid_value"),
        ({"timezone": None}, "timezone", "invalid_value"),
        ({"visible_until": "2030-01-01T00:00:00Z"}, "visible_until", "unknown_field"),
    ],
)
async def test_a_wrong_value_is_400_naming_the_field_and_changes_nothing(
    api: Api, body: dict[str, Any], field: str, code: str
) -> None:
    await api.user("ana")
    r = await api.http.put(POLICY, json={"email": False, **body}, headers=api.auth("ana"))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field and r.json()["error"]["code"] == code, r.text
    assert (await api.http.get(POLICY, headers=api.auth("ana"))).json() == DEFAULTS


async def test_two_first_writes_racing_both_stick(api: Api) -> None:
    """Neither has a row to update: the upsert makes one and the other updates
    only its own field (PostgreSQL: two transactions at once)."""
    await api.user("ana")
    results: list[int] = []

    async def put(body: dict[str, Any]) -> None:
        r = await api.http.put(POLICY, json=body, headers=api.auth("ana"))
        results.append(r.status_code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(put, {"push": False})
        tg.start_soon(put, {"remind_after_min": 30})
    assert results == [200, 200]
    got = (await api.http.get(POLICY, headers=api.auth("ana"))).json()
    assert got["push"] is False and got["remind_after_min"] == 30


def _until(r: Any) -> datetime | None:
    value = r.json()["visible_until"]
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_presence_is_written_at_most_every_15_seconds(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")
    before = utcnow()
    first = await api.http.post(PRESENCE, json={"visible": True}, headers=api.auth("ana"))
    assert first.status_code == 200, first.text
    until = _until(first)
    assert until is not None
    assert before + timedelta(seconds=44) < until <= utcnow() + timedelta(seconds=45)
    # A beacon soon after writes nothing: the same deadline comes back.
    again = await api.http.post(PRESENCE, json={"visible": True}, headers=api.auth("ana"))
    assert _until(again) == until
    # Only ana's: bob is not visible.
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    from mailui4agents.services import notify_policy

    async with gw.read() as s:
        found = await notify_policy.policies(s, ["ana", "bob"])
    assert found["ana"].visible_until == until and found["bob"].visible_until is None
    # The presence is not part of the settings, and changing settings keeps it.
    await api.http.put(POLICY, json={"push": False}, headers=api.auth("ana"))
    assert "visible_until" not in (await api.http.get(POLICY, headers=api.auth("ana"))).json()
    async with gw.read() as s:
        assert (await notify_policy.policies(s, ["ana"]))["ana"].visible_until == until
    # Hidden: cleared at once.
    gone = await api.http.post(PRESENCE, json={"visible": False}, headers=api.auth("ana"))
    assert gone.status_code == 200 and _until(gone) is None
    async with gw.read() as s:
        assert (await notify_policy.policies(s, ["ana"]))["ana"].visible_until is None
    bad = await api.http.post(PRESENCE, json={"visible": "yes"}, headers=api.auth("ana"))
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "visible"


def test_the_write_rule_of_the_beacon() -> None:
    from mailui4agents.services.notify_policy import presence_write_needed

    now = utcnow()
    assert presence_write_needed(None, True, now)
    assert not presence_write_needed(now + timedelta(seconds=31), True, now)
    assert presence_write_needed(now + timedelta(seconds=30), True, now)
    assert presence_write_needed(now + timedelta(seconds=40), False, now)
    assert not presence_write_needed(None, False, now)
