"""The RRULE grammar of RFC 5545 (section 3.3.10), checked before dateutil sees a rule.

dateutil accepts rules it then crashes on (`FREQ=HOURLY;BYHOUR=25`: TypeError;
`BYDAY=+9MO` in a month, `BYEASTER=400`: IndexError), raises while iterating
(`FREQ=MINUTELY;INTERVAL=1440;BYHOUR=3`, `INTERVAL=-1`), or takes values RFC 5545
has not (`BYMONTHDAY=0`). Each part is checked here: known, given once, its
values in range and allowed with the rule's FREQ. Pure: no I/O.
"""

from __future__ import annotations

import re

from mailui4agents.domain.errors import Invalid

FREQS = ("MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")  # no SECONDLY
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
MAX_INTERVAL = 10_000  # 10 000 minutes to 10 000 years: past any horizon
MAX_COUNT = 1_000_000  # within the horizon calendar_max_occurrences counts anyway

# Part → (lowest, highest) of its integers; a negative range also allows -highest..-1.
_RANGES = {
    "BYSECOND": (0, 59),
    "BYMINUTE": (0, 59),
    "BYHOUR": (0, 23),
    "BYMONTH": (1, 12),
    "BYMONTHDAY": (-31, 31),
    "BYYEARDAY": (-366, 366),
    "BYWEEKNO": (-53, 53),
    "BYSETPOS": (-366, 366),
}
_PARTS = ("FREQ", "UNTIL", "COUNT", "INTERVAL", "WKST", "BYDAY", *_RANGES)
_INT = re.compile(r"[+-]?\d{1,6}")
_DAY = re.compile(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL = re.compile(r"\d{8}(T\d{6}Z?)?")
# Parts RFC 5545 forbids with some FREQs ("MUST NOT be specified when ...").
_NOT_WITH = {
    "BYYEARDAY": ("DAILY", "WEEKLY", "MONTHLY"),
    "BYMONTHDAY": ("WEEKLY",),
    "BYWEEKNO": ("MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY"),
}


def check(rule: str, field: str = "rrule") -> dict[str, str]:
    """The parts of `rule` (upper case, no 'RRULE:'), or Invalid naming `field`."""
    parts: dict[str, str] = {}
    for item in rule.split(";"):
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            raise Invalid(field, f"'{item}' is not NAME=VALUE (parts are separated by ';')")
        if name not in _PARTS:
            raise Invalid(field, f"{name} is not an RFC 5545 RRULE part")
        if name in parts:
            raise Invalid(field, f"{name} is given twice")
        parts[name] = value
    freq = parts.get("FREQ")
    if freq == "SECONDLY":
        raise Invalid(field, "FREQ=SECONDLY is not accepted; the shortest gap is a minute")
    if freq not in FREQS:
        raise Invalid(field, f"FREQ is one of {', '.join(FREQS)}")
    if "COUNT" in parts and "UNTIL" in parts:
        raise Invalid(field, "COUNT and UNTIL exclude each other")
    _positive(parts, "INTERVAL", MAX_INTERVAL, field)
    _positive(parts, "COUNT", MAX_COUNT, field)
    if "UNTIL" in parts and not _UNTIL.fullmatch(parts["UNTIL"]):
        raise Invalid(field, "UNTIL is a date (20270101) or a UTC time (20270101T090000Z)")
    if parts.get("WKST", "MO") not in WEEKDAYS:
        raise Invalid(field, f"WKST is one of {', '.join(WEEKDAYS)}")
    for name, (low, high) in _RANGES.items():
        if name in parts:
            for v in _ints(name, parts[name], field):
                if not low <= v <= high or (v == 0 and low < 0):
                    raise Invalid(field, f"{name}={v} is out of range")
    for name, freqs in _NOT_WITH.items():
        if name in parts and freq in freqs:
            raise Invalid(field, f"{name} is not allowed with FREQ={freq}")
    if "BYSETPOS" in parts and not any(p.startswith("BY") and p != "BYSETPOS" for p in parts):
        raise Invalid(field, "BYSETPOS needs another BYxxx part to pick from")
    if "BYDAY" in parts:
        _check_days(parts, freq, field)
    return parts


def _positive(parts: dict[str, str], name: str, high: int, field: str) -> None:
    value = parts.get(name)
    if value is not None and not (value.isdigit() and len(value) <= 7 and 1 <= int(value) <= high):
        raise Invalid(field, f"{name} is a whole number from 1 to {high}")


def _ints(name: str, value: str, field: str) -> list[int]:
    items = value.split(",")
    if not all(_INT.fullmatch(i) for i in items):
        raise Invalid(field, f"{name} is a list of whole numbers")
    return [int(i) for i in items]


def _check_days(parts: dict[str, str], freq: str, field: str) -> None:
    # An ordinal ("-1FR", "+2TU") only in a MONTHLY rule (up to 5 of a weekday in
    # a month) or a YEARLY one (53 in a year; 5 when BYMONTH picks months), and
    # never beside BYWEEKNO.
    most = 5 if freq == "MONTHLY" or (freq == "YEARLY" and "BYMONTH" in parts) else 53
    for item in parts["BYDAY"].split(","):
        m = _DAY.fullmatch(item)
        if m is None:
            raise Invalid(field, f"BYDAY '{item}' is not a weekday such as MO, +1MO or -1FR")
        if m.group(1) is None:
            continue
        n = int(m.group(1))
        if freq not in ("MONTHLY", "YEARLY") or "BYWEEKNO" in parts:
            raise Invalid(field, f"BYDAY '{item}': a numbered weekday needs MONTHLY or YEARLY")
        if not 1 <= abs(n) <= most:
            raise Invalid(field, f"BYDAY '{item}': from -{most} to {most}, not 0")
