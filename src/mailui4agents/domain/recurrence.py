"""When a calendar entry falls due: a start in an IANA time zone, optionally
repeated by an RFC 5545 RRULE (docs/behaviour.md#calendar). Pure: no I/O.

Occurrences are computed on the wall clock of the entry's zone, then turned into
UTC instants: "daily at 09:00 Europe/Berlin" stays at 09:00 local across a DST
change, so its UTC time moves by an hour. A wall time that does not exist (the
hour skipped in spring) resolves as `zoneinfo` does (fold=0: the earlier offset),
so it still happens exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

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


@dataclass(frozen=True)
class Schedule:
    """A validated schedule: wall-clock start, its zone, and the rule (or None)."""

    start: datetime  # naive, wall clock in `tz`
    tz: ZoneInfo
    rule: str | None

    def _rrule(self) -> rrule | None:
        if self.rule is None:
            return None
        rule = _UNTIL_UTC.sub(lambda m: _local_until(m, self.tz), self.rule)
        r = rrulestr(rule, dtstart=self.start, forceset=False, cache=False)
        assert isinstance(r, rrule)
        return r

    def occurrences(self) -> Iterator[datetime]:
        """Every occurrence, in UTC, in order (endless for an unbounded rule)."""
        r = self._rrule()
        if r is None:
            yield to_utc(self.start, self.tz)
            return
        for local in r:
            yield to_utc(local, self.tz)

    def next_after(self, after: datetime | None) -> datetime | None:
        """The first occurrence strictly after `after` (UTC; None: the first one)."""
        r = self._rrule()
        if r is None:
            first = to_utc(self.start, self.tz)
            return first if after is None or first > after else None
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
    return upper


def schedule(
    start: datetime, tz_name: str, rule_text: str | None, limits: Limits, now: datetime
) -> Schedule:
    """Validate a schedule (Invalid names the field): the zone exists, the rule
    parses, the first occurrence is not in the past (a minute's slack for clock
    skew) nor beyond the horizon, and the rule stays within the limits."""
    tz = zone(tz_name)
    rule = parse_rule(rule_text, limits)
    sched = Schedule(local_start(start, tz), tz, rule)
    try:
        r = sched._rrule()
    except (ValueError, TypeError) as e:
        raise Invalid("rrule", f"not an RFC 5545 RRULE: {e}") from None
    if rule is not None and "FREQ=SECONDLY" in rule:
        raise Invalid("rrule", "FREQ=SECONDLY is not accepted; the shortest gap is a minute")
    first = sched.next_after(now - timedelta(seconds=60))
    if first is None:
        raise Invalid("start_at", "the schedule has no occurrence in the future")
    if r is None and first < now - timedelta(seconds=60):
        raise Invalid("start_at", "start_at is in the past")
    if first > now + limits.horizon:
        raise Invalid(
            "start_at",
            f"the first occurrence is more than {limits.horizon.days} days ahead",
            limit=limits.horizon.days,
        )
    if r is not None:
        _check_density(sched, first, limits)
    return sched


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
