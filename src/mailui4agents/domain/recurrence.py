"""When a calendar entry falls due: a start in an IANA time zone, optionally
repeated by an RFC 5545 RRULE (docs/behaviour.md#calendar). Pure: no I/O.

Occurrences are computed on the wall clock of the entry's zone, then turned into
UTC instants: "daily at 09:00 Europe/Berlin" stays at 09:00 local across a DST
change, so its UTC time moves by an hour. A wall time that does not exist (the
hour skipped in spring) resolves as `zoneinfo` does (fold=0: the earlier offset),
so it still happens exactly once.

Validation computes occurrences only up to the horizon (`Schedule.cap`). dateutil
stops at UNTIL only on a day the rule's BYxxx parts keep: a rule that keeps none
(`FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30`) was walked day by day to the year 9999,
8 s of CPU per request on the event loop. So the capped schedule is computed as
many years later as its years keep their calendar (weekdays, leap years), as close
to 9999 as fits: some decades are walked past the cap, not millennia. The rule's
grammar is checked before dateutil reads it (domain/rrule_parts.py).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, date, datetime, timedelta
from functools import cached_property
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

from mailui4agents.domain import rrule_parts
from mailui4agents.domain.errors import Invalid

# RRULE parts that make no sense for mail or that dateutil reads as a second rule.
_REFUSED_PARTS = ("DTSTART", "RDATE", "EXRULE", "EXDATE")


@dataclass(frozen=True)
class Limits:
    """How far and how often an entry may recur (settings: calendar_*)."""

    horizon: timedelta  # the first occurrence lies at most this far ahead
    max_occurrences: int  # at most this many occurrences within `horizon` of the first
    min_gap: timedelta  # occurrences at least this far apart
    max_rule_bytes: int = 500


def zone(name: str, field: str = "timezone") -> ZoneInfo:
    """The IANA zone `name`, or Invalid naming `field`."""
    if not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        raise Invalid(field, f"'{name}' is not an IANA time zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(
            field, f"'{name}' is not an IANA time zone name such as 'Europe/Berlin'"
        ) from None


def local_start(start: datetime, tz: ZoneInfo) -> datetime:
    """The start as a naive wall-clock time in `tz` (an aware start is converted
    first; a naive one is already wall-clock time in `tz`)."""
    if start.tzinfo is not None:
        start = start.astimezone(tz)
    return start.replace(tzinfo=None, microsecond=0)


def to_utc(local: datetime, tz: ZoneInfo) -> datetime:
    return local.replace(tzinfo=tz).astimezone(UTC)


# RFC 5545 writes UNTIL in UTC ("…Z") when the start has a zone; dateutil wants it
# in the same (naive, wall-clock) terms as our start.
_UNTIL_UTC = re.compile(r"UNTIL=(\d{8}T\d{6})Z")


def _local_until(m: re.Match[str], tz: ZoneInfo) -> str:
    at = datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    return "UNTIL=" + at.astimezone(tz).strftime("%Y%m%dT%H%M%S")


_WALL = "%Y%m%dT%H%M%S"
MAX_START_AGO = timedelta(days=1)  # how far back a new schedule may start
# What dateutil raises on a rule it cannot follow (after rrule_parts has checked it).
DATEUTIL_ERRORS = (ValueError, TypeError, IndexError, OverflowError)


def _calendar(year: int) -> tuple[bool, int]:
    return calendar.isleap(year), date(year, 1, 1).weekday()


def same_calendar_shift(first: int, last: int) -> int:
    """The most years (up to 400: the Gregorian cycle) the years `first`…`last`
    can move towards 9999 with every date on the same weekday and every year as
    long: the calendar they have there is theirs."""
    mine = [_calendar(y) for y in range(first, last + 1)]
    for shift in range(MAXYEAR - 1 - last, -1, -1):
        if all(_calendar(first + i + shift) == c for i, c in enumerate(mine)):
            return shift
    return 0


def _later(at: datetime, years: int) -> datetime:
    return at.replace(year=at.year + years) if years else at


def _capped(rule: str, cap: datetime, shift: int) -> tuple[str, int | None]:
    """`rule` (UNTIL already local) ending at `cap` at the latest, `shift` years
    later, without its COUNT (dateutil refuses COUNT with UNTIL); and the COUNT."""
    parts = rrule_parts.check(rule)
    count = parts.pop("COUNT", None)
    until = parts.pop("UNTIL", None)
    if until is not None:
        at = datetime.strptime(until, _WALL) if "T" in until else datetime.strptime(until, "%Y%m%d")
        cap = min(cap, at)
    parts["UNTIL"] = _later(cap, shift).strftime(_WALL)
    return ";".join(f"{k}={v}" for k, v in parts.items()), None if count is None else int(count)


@dataclass(frozen=True)
class Schedule:
    """A validated schedule: wall-clock start, its zone, and the rule (or None)."""

    start: datetime  # naive, wall clock in `tz`
    tz: ZoneInfo
    rule: str | None
    cap: datetime | None = None  # naive wall clock: nothing is computed past it

    def _rrule(self) -> tuple[rrule | None, int | None]:
        """The dateutil rule, and the COUNT left out of it when capped."""
        if self.rule is None:
            return None, None
        rule = _UNTIL_UTC.sub(lambda m: _local_until(m, self.tz), self.rule)
        count = None
        if self.cap is not None:
            rule, count = _capped(rule, self.cap, self._shift)
        r = rrulestr(rule, dtstart=_later(self.start, self._shift), forceset=False, cache=False)
        assert isinstance(r, rrule)
        return r, count

    @cached_property  # read per occurrence (_wall); it walks up to ~400 years
    def _shift(self) -> int:
        """Years the capped schedule is computed later (module docstring)."""
        if self.cap is None:
            return 0
        return same_calendar_shift(self.start.year - 1, self.cap.year + 1)

    def _wall(self, shifted: datetime) -> datetime:
        return _later(shifted, -self._shift)

    def occurrences(self) -> Iterator[datetime]:
        """Every occurrence, in UTC, in order (endless for an unbounded rule)."""
        r, count = self._rrule()
        if r is None:
            yield to_utc(self.start, self.tz)
            return
        for n, local in enumerate(r):
            if count is not None and n >= count:
                return
            yield to_utc(self._wall(local), self.tz)

    def next_after(self, after: datetime | None) -> datetime | None:
        """The first occurrence strictly after `after` (UTC; None: the first one)."""
        r, _ = self._rrule()
        if r is None:
            first = to_utc(self.start, self.tz)
            return first if after is None or first > after else None
        if self.cap is not None:  # capped: walked from the start, to the cap at most
            return next((at for at in self.occurrences() if after is None or at > after), None)
        if after is None:
            for local in r:
                return to_utc(local, self.tz)
            return None
        # Search in wall-clock time, a day early (offsets differ by < 1 day), then
        # compare instants: wall times are not monotonic across a DST change.
        probe = after.astimezone(self.tz).replace(tzinfo=None) - timedelta(days=1)
        for local in r.xafter(probe, inc=True):
            at = to_utc(local, self.tz)
            if at > after:
                return at
        return None


def parse_rule(text: str | None, limits: Limits, field: str = "rrule") -> str | None:
    """The RRULE value, normalised (no 'RRULE:' prefix, upper case), or None."""
    if text is None:
        return None
    rule = text.strip()
    if rule.upper().startswith("RRULE:"):
        rule = rule[len("RRULE:") :]
    if not rule:
        return None
    if len(rule.encode()) > limits.max_rule_bytes:
        raise Invalid(field, f"the rule is longer than {limits.max_rule_bytes} bytes")
    if "\n" in rule or "\r" in rule:
        raise Invalid(field, "one RRULE only (no line breaks, no DTSTART/EXDATE lines)")
    upper = rule.upper()
    for part in _REFUSED_PARTS:
        if part in upper:
            raise Invalid(field, f"{part} is not accepted in rrule; give start_at and timezone")
    rrule_parts.check(upper, field)
    return upper


def schedule(
    start: datetime,
    tz_name: str,
    rule_text: str | None,
    limits: Limits,
    now: datetime,
    *,
    new_start: bool = True,
) -> Schedule:
    """Validate a schedule (Invalid names the field): the zone exists, the rule
    parses, the first occurrence is not in the past (a minute's slack for clock
    skew) nor beyond the horizon, and the rule stays within the limits.
    `new_start`: the start or the rule is new (not an edit of other fields), so
    it may lie at most MAX_START_AGO in the past: occurrences are computed from
    the start, and a rule started years ago would be walked from then."""
    tz = zone(tz_name)
    rule = parse_rule(rule_text, limits)
    sched = Schedule(local_start(start, tz), tz, rule)
    if new_start and to_utc(sched.start, tz) < now - MAX_START_AGO:
        raise Invalid("start_at", "start_at is more than a day ago; give the next occurrence")
    # Nothing past the horizon (and a day for the zone's offset) is computed here.
    end = (now + limits.horizon).astimezone(tz).replace(tzinfo=None) + timedelta(days=1)
    try:
        first = _checked(Schedule(sched.start, tz, rule, cap=end), now, limits)
    except DATEUTIL_ERRORS as e:
        raise Invalid("rrule", f"not an RFC 5545 RRULE: {e}") from None
    if first > now + limits.horizon:
        raise Invalid(
            "start_at",
            f"the first occurrence is more than {limits.horizon.days} days ahead",
            limit=limits.horizon.days,
        )
    return sched


def _checked(capped: Schedule, now: datetime, limits: Limits) -> datetime:
    """The first occurrence (Invalid if none; nothing past the cap is computed)."""
    first = capped.next_after(now - timedelta(seconds=60))
    if first is None:
        raise Invalid(
            "start_at",
            f"the schedule has no occurrence in the next {limits.horizon.days} days",
            limit=limits.horizon.days,
        )
    if capped.rule is None and first < now - timedelta(seconds=60):
        raise Invalid("start_at", "start_at is in the past")
    if capped.rule is not None and first <= now + limits.horizon:
        _check_density(capped, first, limits)
    return first


def _check_density(sched: Schedule, first: datetime, limits: Limits) -> None:
    end = first + limits.horizon
    prev: datetime | None = None
    n = 0
    for at in sched.occurrences():
        if at < first:
            continue
        if at > end:
            break
        if prev is not None and at - prev < limits.min_gap:
            raise Invalid(
                "rrule",
                f"occurrences are {int((at - prev).total_seconds())} s apart; "
                f"at least {int(limits.min_gap.total_seconds())} s",
                limit=int(limits.min_gap.total_seconds()),
            )
        n += 1
        if n > limits.max_occurrences:
            raise Invalid(
                "rrule",
                f"more than {limits.max_occurrences} occurrences within "
                f"{limits.horizon.days} days; add COUNT or UNTIL, or repeat less often",
                limit=limits.max_occurrences,
            )
        prev = at
