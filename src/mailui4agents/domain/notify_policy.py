"""A person's notification policy, as rules without I/O (docs/remote.md,
"Notification policy"). The clock and the time zone are parameters.

Who is pushed when a request opens (`first_wave`), whom a reminder reaches and
when (`reminder_step`), when the other deciders are pushed after the owners
(`escalation_step`). services/notify_policy.py reads the policies and the
session's deciders; services/notify_due.py claims the reminders/escalations.

- Quiet hours are wall-clock times in the person's IANA zone: the local time of
  an instant is what zoneinfo says it is, so a window keeps its wall-clock ends
  across a DST change (a 22:00-07:00 night lasts 8 h when the clocks go forward).
  A window whose start is after its end crosses midnight.
- Escalation: while an owner with `escalate_after_min` is reachable when the
  request opens (push on, not in quiet hours — a visible page counts as reached:
  that owner is looking), the session's other deciders are held back; M minutes
  later, still unanswered, they get an "escalation" push.
- Reminder: each person the request was first for (the owners, and the other
  deciders unless held back) with `remind_after_min` = N gets one reminder N
  minutes after it opened, unless at that moment they are in quiet hours, their
  page is visible or their push is off (then it is not sent, not postponed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from mailui4agents.domain.errors import Invalid
from mailui4agents.domain.recurrence import zone

OWNER, DECIDER = "owner", "decider"  # services/access.py's session roles
PUSH_CONTENT = ("preview", "none")
MIN_MINUTES, MAX_MINUTES = 1, 1440
_CLOCK = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]")

Reason = Literal["push_off", "quiet_hours", "visible"]


@dataclass(frozen=True, slots=True)
class Policy:
    """One person's policy; the defaults are what a person without a row gets."""

    push: bool = True
    email: bool = True  # request e-mails
    email_mail: bool = True  # an e-mail of each agent's mail to the person
    push_content: str = "preview"  # preview | none: a push shows the tool and input, or not
    skip_when_visible: bool = True
    quiet_start: str | None = None  # "22:00", local time in `timezone`
    quiet_end: str | None = None  # "07:00"
    timezone: str = "UTC"
    remind_after_min: int | None = None
    escalate_after_min: int | None = None
    email_digest_hour: int | None = None  # the daily digest's local hour 0-23; None: none
    visible_until: datetime | None = None


# The fields a person sets (visible_until is the presence beacon's, not theirs).
SETTABLE = (
    "push",
    "email",
    "email_mail",
    "push_content",
    "skip_when_visible",
    "quiet_start",
    "quiet_end",
    "timezone",
    "remind_after_min",
    "escalate_after_min",
    "email_digest_hour",
)


# --- validation -------------------------------------------------------------


def minutes_of(value: str, field: str) -> int:
    """ "HH:MM" (00:00-23:59) as minutes after midnight, or Invalid naming `field`."""
    if not isinstance(value, str) or not _CLOCK.fullmatch(value):
        raise Invalid(field, f"{field} must be a time HH:MM from 00:00 to 23:59, not {value!r}")
    hours, mins = value.split(":")
    return int(hours) * 60 + int(mins)


def check_minutes(value: int | None, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(field, f"{field} must be a whole number of minutes")
    if not MIN_MINUTES <= value <= MAX_MINUTES:
        raise Invalid(
            field, f"{field} must be {MIN_MINUTES}-{MAX_MINUTES} minutes (or null: never)"
        )
    return value


def check_hour(value: int | None, field: str) -> int | None:
    """A local hour 0-23, or None (off); Invalid naming `field` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 23:
        raise Invalid(field, f"{field} must be an hour from 0 to 23 (or null: no digest)")
    return value


def digest_day(now: datetime, hour: int | None, timezone: str) -> str | None:
    """The person's local date (YYYY-MM-DD) whose digest is due at the aware
    instant `now`: their local hour is at or past `hour`; None when not due
    (no digest hour, or too early in their day)."""
    if hour is None:
        return None
    if now.tzinfo is None:
        raise ValueError("digest_day needs an aware datetime")
    local = now.astimezone(zone(timezone))
    return local.date().isoformat() if local.hour >= hour else None


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(field, f"{field} must be true or false")
    return value


def validate(p: Policy) -> Policy:
    """`p` if every field is well-formed, else Invalid naming the first wrong one."""
    for name in ("push", "email", "skip_when_visible"):
        _check_bool(getattr(p, name), name)
    if p.push_content not in PUSH_CONTENT:
        raise Invalid("push_content", "push_content must be 'preview' or 'none'")
    if not isinstance(p.timezone, str):
        raise Invalid("timezone", "timezone must be an IANA time zone name")
    zone(p.timezone, "timezone")
    if (p.quiet_start is None) != (p.quiet_end is None):
        missing = "quiet_end" if p.quiet_end is None else "quiet_start"
        raise Invalid(missing, "quiet hours need both quiet_start and quiet_end (or neither)")
    if p.quiet_start is not None and p.quiet_end is not None:
        start = minutes_of(p.quiet_start, "quiet_start")
        if minutes_of(p.quiet_end, "quiet_end") == start:
            raise Invalid("quiet_end", "quiet_end must differ from quiet_start")
    check_minutes(p.remind_after_min, "remind_after_min")
    check_minutes(p.escalate_after_min, "escalate_after_min")
    check_hour(p.email_digest_hour, "email_digest_hour")
    return p


def updated(p: Policy, changes: dict[str, Any]) -> Policy:
    """`p` with `changes` (a partial update: only the fields given), validated."""
    unknown = sorted(set(changes) - set(SETTABLE))
    if unknown:
        raise Invalid(unknown[0], f"{unknown[0]} is not a setting")
    return validate(replace(p, **changes))


# --- the rules --------------------------------------------------------------


def in_quiet_hours(now: datetime, start: str | None, end: str | None, timezone: str) -> bool:
    """Whether the aware instant `now` falls in [start, end) of the wall clock of
    `timezone`; start > end crosses midnight; no window: never."""
    if start is None or end is None:
        return False
    if now.tzinfo is None:
        raise ValueError("in_quiet_hours needs an aware datetime")
    local = now.astimezone(zone(timezone))
    t = local.hour * 60 + local.minute
    a, b = minutes_of(start, "quiet_start"), minutes_of(end, "quiet_end")
    if a < b:
        return a <= t < b
    return t >= a or t < b  # across midnight (a == b is refused by validate)


def is_visible(p: Policy, now: datetime) -> bool:
    """One of the person's pages said it is visible, recently enough."""
    return p.visible_until is not None and p.visible_until > now


def suppressed(p: Policy, now: datetime) -> Reason | None:
    """Why a push to this person is not sent now (None: it is)."""
    if not p.push:
        return "push_off"
    if in_quiet_hours(now, p.quiet_start, p.quiet_end, p.timezone):
        return "quiet_hours"
    if p.skip_when_visible and is_visible(p, now):
        return "visible"
    return None


def reachable(p: Policy, at: datetime) -> bool:
    """The person would learn of a request opening at `at`: pushed, or looking at
    a page (push on, not in quiet hours). Deterministic from the policy and `at`,
    so the scheduler decides later exactly as the opening did."""
    return p.push and not in_quiet_hours(at, p.quiet_start, p.quiet_end, p.timezone)


@dataclass(frozen=True, slots=True)
class Decider:
    name: str
    role: str  # owner | decider
    policy: Policy = field(default_factory=Policy)


def escalate_after(deciders: Sequence[Decider], opened_at: datetime) -> int | None:
    """Minutes after which the held-back deciders get an escalation push, or None
    when nobody is held back: no other decider, or no owner with escalate_after_min
    reachable when the request opened (then everyone was pushed at once)."""
    if not any(d.role != OWNER for d in deciders):
        return None
    held = [
        d.policy.escalate_after_min
        for d in deciders
        if d.role == OWNER
        and d.policy.escalate_after_min is not None
        and reachable(d.policy, opened_at)
    ]
    return min(held) if held else None


def first_audience(deciders: Sequence[Decider], opened_at: datetime) -> list[Decider]:
    """Whom a request opening at `opened_at` is first for: the owners, and the
    other deciders unless an owner holds them back for escalation."""
    held = escalate_after(deciders, opened_at) is not None
    return [d for d in deciders if d.role == OWNER or not held]


def first_wave(deciders: Sequence[Decider], now: datetime) -> list[Decider]:
    """Whom to push as the request opens at `now`."""
    return [d for d in first_audience(deciders, now) if suppressed(d.policy, now) is None]


@dataclass(frozen=True, slots=True)
class Step:
    """A reminder or escalation that fell due: `to` is pushed now, `skipped`
    (name, reason) are not; `mark` is what the claim stores (reminded_at /
    escalated_at), `after` the earliest due time in it (the claim's condition)."""

    kind: Literal["reminder", "escalation"]
    to: list[Decider]
    skipped: list[tuple[str, Reason]]
    after: datetime
    mark: datetime


def _split(
    kind: Literal["reminder", "escalation"],
    people: list[tuple[Decider, datetime]],
    now: datetime,
) -> Step:
    to: list[Decider] = []
    skipped: list[tuple[str, Reason]] = []
    for d, _ in people:
        why = suppressed(d.policy, now)
        if why is None:
            to.append(d)
        else:
            skipped.append((d.name, why))
    return Step(kind, to, skipped, min(due for _, due in people), now)


def reminder_step(
    deciders: Sequence[Decider],
    opened_at: datetime,
    reminded_at: datetime | None,
    now: datetime,
) -> Step | None:
    """The reminders due at `now` that no earlier claim covered: everyone with a
    reminder time in (reminded_at, now] (each person's time: opened_at + their
    remind_after_min). `reminded_at` is the claim mark: every reminder due up to
    it was handled, so each person gets at most one."""
    people = []
    for d in first_audience(deciders, opened_at):
        if d.policy.remind_after_min is None:
            continue
        due = opened_at + timedelta(minutes=d.policy.remind_after_min)
        if due <= now and (reminded_at is None or due > reminded_at):
            people.append((d, due))
    return _split("reminder", people, now) if people else None


def escalation_step(
    deciders: Sequence[Decider],
    opened_at: datetime,
    escalated_at: datetime | None,
    now: datetime,
) -> Step | None:
    """The escalation to the held-back deciders, once, when it fell due."""
    if escalated_at is not None:
        return None
    after = escalate_after(deciders, opened_at)
    if after is None:
        return None
    due = opened_at + timedelta(minutes=after)
    if due > now:
        return None
    return _split("escalation", [(d, due) for d in deciders if d.role != OWNER], now)
