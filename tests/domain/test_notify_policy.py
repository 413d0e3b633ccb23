"""domain/notify_policy.py: quiet hours across midnight and DST, what suppresses a
push, who is pushed first, reminders and escalation, and validation naming the
field (docs/remote.md, "Notification policy")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.errors import Invalid
from mailui4agents.domain.notify_policy import (
    DECIDER,
    OWNER,
    Decider,
    Policy,
    digest_day,
    escalation_step,
    first_wave,
    in_quiet_hours,
    minutes_of,
    reminder_step,
    suppressed,
    updated,
    validate,
)

MADRID = "Europe/Madrid"
ZONES = [
    "UTC",
    MADRID,
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Pacific/Chatham",
]
clock = st.integers(0, 1439).map(lambda m: f"{m // 60:02d}:{m % 60:02d}")
# Instants over several years, so every zone's DST changes are crossed.
instants = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# --- quiet hours --------------------------------------------------------------


def test_a_window_across_midnight_in_the_persons_zone() -> None:
    # 22:00-07:00 in Madrid (UTC+1 in January): 21:00-06:00 UTC.
    assert in_quiet_hours(utc(2026, 1, 10, 21, 0), "22:00", "07:00", MADRID)
    assert in_quiet_hours(utc(2026, 1, 10, 23, 59), "22:00", "07:00", MADRID)
    assert in_quiet_hours(utc(2026, 1, 11, 5, 59), "22:00", "07:00", MADRID)
    # negative controls: just outside either end (the end itself is not quiet)
    assert not in_quiet_hours(utc(2026, 1, 10, 20, 59), "22:00", "07:00", MADRID)
    assert not in_quiet_hours(utc(2026, 1, 11, 6, 0), "22:00", "07:00", MADRID)
    # the same instant in UTC's wall clock is outside
    assert not in_quiet_hours(utc(2026, 1, 10, 21, 30), "22:00", "07:00", "UTC")
    # no window: never quiet
    assert not in_quiet_hours(utc(2026, 1, 10, 23, 0), None, None, MADRID)


def test_a_window_within_one_day() -> None:
    assert in_quiet_hours(utc(2026, 7, 1, 11, 0), "12:30", "14:00", MADRID)  # 13:00 CEST
    assert not in_quiet_hours(utc(2026, 7, 1, 12, 0), "12:30", "14:00", MADRID)  # 14:00
    assert not in_quiet_hours(utc(2026, 7, 1, 10, 29), "12:30", "14:00", MADRID)  # 12:29


def _quiet_minutes(start_utc: datetime, hours: int, window: tuple[str, str], tz: str) -> int:
    return sum(
        in_quiet_hours(start_utc + timedelta(minutes=m), *window, tz) for m in range(hours * 60)
    )


def test_the_night_the_clocks_go_forward_is_an_hour_shorter() -> None:
    # Madrid, 29 March 2026: 02:00 CET becomes 03:00 CEST. 22:00-07:00 keeps its
    # wall-clock ends: 8 real hours that night, 9 the night before.
    assert _quiet_minutes(utc(2026, 3, 28, 12), 24, ("22:00", "07:00"), MADRID) == 8 * 60
    assert _quiet_minutes(utc(2026, 3, 27, 12), 24, ("22:00", "07:00"), MADRID) == 9 * 60
    # and an hour longer when they go back (25 October 2026)
    assert _quiet_minutes(utc(2026, 10, 24, 12), 24, ("22:00", "07:00"), MADRID) == 10 * 60


def test_a_window_inside_the_skipped_hour_does_not_exist_that_night() -> None:
    # 02:15-02:45 never happens on 29 March 2026 in Madrid; on 28 March it does.
    assert _quiet_minutes(utc(2026, 3, 28, 12), 24, ("02:15", "02:45"), MADRID) == 0
    assert _quiet_minutes(utc(2026, 3, 27, 12), 24, ("02:15", "02:45"), MADRID) == 30
    # The repeated hour (25 October: 02:00-03:00 twice) is quiet both times.
    assert _quiet_minutes(utc(2026, 10, 24, 12), 24, ("02:15", "02:45"), MADRID) == 60


@given(instants, clock, clock, st.sampled_from(ZONES))
def test_a_window_and_its_complement_cover_every_instant_once(
    now: datetime, a: str, b: str, tz: str
) -> None:
    if a == b:
        return
    assert in_quiet_hours(now, a, b, tz) != in_quiet_hours(now, b, a, tz)


@given(instants, clock, clock, st.sampled_from(ZONES))
def test_only_the_wall_clock_counts(now: datetime, a: str, b: str, tz: str) -> None:
    """The answer for an instant is the answer for its local wall time read as
    UTC: the zone's offset (and DST) only moves the wall clock."""
    if a == b:
        return
    wall = now.astimezone(ZoneInfo(tz)).replace(tzinfo=UTC)
    assert in_quiet_hours(now, a, b, tz) == in_quiet_hours(wall, a, b, "UTC")


@given(instants, clock, st.sampled_from(ZONES))
def test_the_start_minute_is_quiet_and_the_end_minute_is_not(
    now: datetime, other: str, tz: str
) -> None:
    local = now.astimezone(ZoneInfo(tz))
    here = f"{local.hour:02d}:{local.minute:02d}"
    if other == here:
        return
    assert in_quiet_hours(now, here, other, tz)
    assert not in_quiet_hours(now, other, here, tz)


@given(st.integers(0, 1439), st.integers(1, 1439), st.sampled_from(ZONES), instants)
def test_across_midnight_is_the_union_of_two_same_day_windows(
    start: int, length: int, tz: str, now: datetime
) -> None:
    """[a, b) across midnight is [a, 24:00) plus [00:00, b): checked against the
    same-day branch."""
    end = (start + length) % 1440
    a, b = f"{start // 60:02d}:{start % 60:02d}", f"{end // 60:02d}:{end % 60:02d}"
    if start < end:
        return
    late = start < 1439 and in_quiet_hours(now, a, "23:59", tz)
    local = now.astimezone(ZoneInfo(tz))
    at_2359 = (local.hour, local.minute) == (23, 59)
    early = end > 0 and in_quiet_hours(now, "00:00", b, tz)
    assert in_quiet_hours(now, a, b, tz) == (late or at_2359 or early)


# --- suppression --------------------------------------------------------------


NOW = utc(2026, 6, 1, 12, 0)


def test_what_suppresses_a_push() -> None:
    assert suppressed(Policy(), NOW) is None
    assert suppressed(Policy(push=False), NOW) == "push_off"
    quiet = Policy(quiet_start="11:00", quiet_end="13:00")
    assert suppressed(quiet, NOW) == "quiet_hours"
    seen = Policy(visible_until=NOW + timedelta(seconds=10))
    assert suppressed(seen, NOW) == "visible"
    # negative controls: a beacon that ran out; a visible page when the person
    # wants pushes anyway
    assert suppressed(Policy(visible_until=NOW), NOW) is None
    assert suppressed(Policy(visible_until=NOW - timedelta(seconds=1)), NOW) is None
    assert (
        suppressed(Policy(skip_when_visible=False, visible_until=NOW + timedelta(60)), NOW) is None
    )


# --- who is pushed, reminders, escalation -------------------------------------

OPENED = utc(2026, 6, 1, 12, 0)


def people(owner: Policy, decider: Policy | None = None) -> list[Decider]:
    return [Decider("ana", OWNER, owner), Decider("bob", DECIDER, decider or Policy())]


def names(ds: list[Decider]) -> list[str]:
    return [d.name for d in ds]


def test_everyone_is_pushed_without_escalation() -> None:
    assert names(first_wave(people(Policy()), OPENED)) == ["ana", "bob"]
    assert escalation_step(people(Policy()), OPENED, None, OPENED + timedelta(days=1)) is None


def test_an_owner_with_escalation_holds_the_other_deciders_back() -> None:
    group = people(Policy(escalate_after_min=10))
    assert names(first_wave(group, OPENED)) == ["ana"]
    assert escalation_step(group, OPENED, None, OPENED + timedelta(minutes=9)) is None
    step = escalation_step(group, OPENED, None, OPENED + timedelta(minutes=10))
    assert step is not None and step.kind == "escalation" and names(step.to) == ["bob"]
    assert step.after == OPENED + timedelta(minutes=10)
    # once claimed, never again
    assert (
        escalation_step(group, OPENED, OPENED + timedelta(minutes=10), OPENED + timedelta(1))
        is None
    )


def test_an_owner_in_quiet_hours_holds_nobody_back() -> None:
    # The owner would not learn of it: the deciders are pushed at once, no escalation.
    group = people(Policy(escalate_after_min=10, quiet_start="11:00", quiet_end="13:00"))
    assert names(first_wave(group, OPENED)) == ["bob"]
    assert escalation_step(group, OPENED, None, OPENED + timedelta(hours=1)) is None
    # ... nor one whose push is off
    off = people(Policy(escalate_after_min=10, push=False))
    assert names(first_wave(off, OPENED)) == ["bob"]


def test_an_owner_looking_at_a_page_still_holds_back() -> None:
    # Not pushed (the page shows it), but reached: bob waits for the escalation.
    group = people(Policy(escalate_after_min=5, visible_until=OPENED + timedelta(seconds=40)))
    assert names(first_wave(group, OPENED)) == []
    step = escalation_step(group, OPENED, None, OPENED + timedelta(minutes=5))
    assert step is not None and names(step.to) == ["bob"]


def test_escalation_skips_deciders_in_quiet_hours() -> None:
    group = people(Policy(escalate_after_min=5), Policy(quiet_start="12:00", quiet_end="12:30"))
    step = escalation_step(group, OPENED, None, OPENED + timedelta(minutes=5))
    assert step is not None and step.to == [] and step.skipped == [("bob", "quiet_hours")]


def test_each_person_gets_one_reminder_at_their_own_time() -> None:
    group = people(Policy(remind_after_min=5), Policy(remind_after_min=20))
    assert reminder_step(group, OPENED, None, OPENED + timedelta(minutes=4)) is None
    first = reminder_step(group, OPENED, None, OPENED + timedelta(minutes=6))
    assert first is not None and names(first.to) == ["ana"]
    assert first.after == OPENED + timedelta(minutes=5)
    # After the mark (the claim's time), only bob's is still due, at 20 min.
    mark = first.mark
    assert reminder_step(group, OPENED, mark, OPENED + timedelta(minutes=19)) is None
    second = reminder_step(group, OPENED, mark, OPENED + timedelta(minutes=21))
    assert second is not None and names(second.to) == ["bob"]
    assert reminder_step(group, OPENED, second.mark, OPENED + timedelta(hours=3)) is None


def test_a_reminder_is_not_sent_in_quiet_hours_nor_while_visible() -> None:
    quiet = people(Policy(remind_after_min=5, quiet_start="12:05", quiet_end="13:00"))
    step = reminder_step(quiet, OPENED, None, OPENED + timedelta(minutes=5))
    assert step is not None and step.to == [] and step.skipped == [("ana", "quiet_hours")]
    at = OPENED + timedelta(minutes=5)
    seen = people(Policy(remind_after_min=5, visible_until=at + timedelta(seconds=20)))
    step = reminder_step(seen, OPENED, None, at)
    assert step is not None and step.to == [] and step.skipped == [("ana", "visible")]


def test_held_back_deciders_get_no_reminder() -> None:
    group = people(Policy(escalate_after_min=30), Policy(remind_after_min=5))
    assert reminder_step(group, OPENED, None, OPENED + timedelta(minutes=10)) is None
    # negative control: without the hold bob is reminded
    free = people(Policy(), Policy(remind_after_min=5))
    step = reminder_step(free, OPENED, None, OPENED + timedelta(minutes=10))
    assert step is not None and names(step.to) == ["bob"]


# --- validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"quiet_start": "24:00", "quiet_end": "07:00"}, "quiet_start"),
        ({"quiet_start": "22:00", "quiet_end": "7:00"}, "quiet_end"),
        ({"quiet_start": "22:00", "quiet_end": "07:60"}, "quiet_end"),
        ({"quiet_start": "22:00"}, "quiet_end"),
        ({"quiet_end": "07:00"}, "quiet_start"),
        ({"quiet_start": "07:00", "quiet_end": "07:00"}, "quiet_end"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": "../etc/passwd"}, "timezone"),
        ({"timezone": ""}, "timezone"),
        ({"remind_after_min": 0}, "remind_after_min"),
        ({"remind_after_min": 1441}, "remind_after_min"),
        ({"escalate_after_min": -5}, "escalate_after_min"),
        ({"escalate_after_min": True}, "escalate_after_min"),
        ({"push_content": "full"}, "push_content"),
        ({"push": "yes"}, "push"),
        ({"visible_until": NOW}, "visible_until"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(Invalid) as err:
        updated(Policy(), changes)
    assert err.value.field == field


def test_good_values_pass() -> None:
    p = updated(
        Policy(),
        {
            "quiet_start": "22:00",
            "quiet_end": "07:00",
            "timezone": MADRID,
            "remind_after_min": 1,
            "escalate_after_min": 1440,
            "push_content": "none",
            "push": False,
        },
    )
    assert validate(p) == p and p.timezone == MADRID and p.escalate_after_min == 1440
    # clearing quiet hours takes both ends
    assert updated(p, {"quiet_start": None, "quiet_end": None}).quiet_start is None
    assert minutes_of("23:59", "x") == 1439


def test_the_digest_is_due_from_its_hour_on_the_persons_own_clock() -> None:
    # 07:30 UTC is 08:30 in Madrid in winter: due with hour 8, not with hour 9.
    at = datetime(2026, 12, 2, 7, 30, tzinfo=UTC)
    assert digest_day(at, 8, MADRID) == "2026-12-02"
    assert digest_day(at, 9, MADRID) is None
    assert digest_day(at, None, MADRID) is None
    # 23:30 UTC is already the next day in Madrid: that day's digest.
    assert digest_day(datetime(2026, 12, 2, 23, 30, tzinfo=UTC), 0, MADRID) == "2026-12-03"
    with pytest.raises(ValueError):
        digest_day(datetime(2026, 12, 2, 7, 30), 8, MADRID)


@pytest.mark.parametrize("hour", [-1, 24, True, 7.0, "7"])
def test_a_digest_hour_outside_0_to_23_is_refused_naming_the_field(hour: object) -> None:
    with pytest.raises(Invalid) as err:
        updated(Policy(), {"email_digest_hour": hour})
    assert err.value.field == "email_digest_hour"
    assert updated(Policy(), {"email_digest_hour": 0}).email_digest_hour == 0
