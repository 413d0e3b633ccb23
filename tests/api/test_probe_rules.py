"""Repeat rules the attack probe (issue 22, item 6) found dateutil crashing or
hanging on: each is a 400 naming `rrule` (or `start_at` for a sound rule with no
occurrence within the horizon), on create and on PATCH, people and agents alike,
answered within a bound; ordinary rules still pass (domain/rrule_parts.py,
domain/recurrence.py)."""

from __future__ import annotations

import time

import pytest

from tests.api.test_probe_inputs import AGENT_CAL, CAL, _other, _soon, build_world
from tests.api.test_strict_input import error_of
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio


@snapshot
async def world(api: Api) -> dict[str, str]:
    return await build_world(api)


BAD_RULES = [
    "FREQ=HOURLY;BYHOUR=25",  # TypeError in dateutil
    "FREQ=YEARLY;BYEASTER=400",  # IndexError (and BYEASTER is no RFC 5545 part)
    "FREQ=MINUTELY;INTERVAL=1440;BYHOUR=3",  # ValueError raised while iterating
    "FREQ=MONTHLY;BYMONTHDAY=0",  # accepted, RFC 5545 has no day 0
    "FREQ=MONTHLY;BYDAY=+9MO",  # IndexError: no ninth Monday in a month
    "FREQ=YEARLY;BYDAY=+60MO",  # IndexError
    "FREQ=WEEKLY;BYDAY=+2MO",  # an ordinal only with MONTHLY or YEARLY
    "FREQ=DAILY;INTERVAL=-1",  # ValueError while iterating
    "FREQ=DAILY;INTERVAL=0",
    "FREQ=DAILY;COUNT=0",
    "FREQ=DAILY;COUNT=2;UNTIL=20300101T000000Z",  # both: RFC 5545 says MUST NOT
    "FREQ=DAILY;INTERVAL=99999999999999999999",
    "FREQ=DAILY;BYHOUR=9;BYHOUR=10",  # a part twice
    "FREQ=DAILY;FOO=1",
    "FREQ=DAILY;BYHOUR=",
    "FREQ=DAILY;;",
    "BYHOUR=9",  # no FREQ
    "FREQ=DAILY;BYYEARDAY=1",  # BYYEARDAY not with DAILY
    "FREQ=MONTHLY;BYWEEKNO=1",  # BYWEEKNO only with YEARLY
    "FREQ=DAILY;BYSETPOS=1",  # BYSETPOS only beside another BYxxx
    "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30",  # none ever: was 8 s of CPU
    "FREQ=HOURLY;BYMONTH=4;BYMONTHDAY=31;BYHOUR=3",  # none ever: was 3 s of CPU
]
RULE_SECONDS = 1.5  # each answer is bounded (the probe's rules took up to 9 s)


@pytest.mark.parametrize("rule", BAD_RULES)
@pytest.mark.parametrize("who", ["ana", "claude"])
async def test_a_rule_dateutil_cannot_or_should_not_take_is_a_400_naming_rrule(
    api: Api, world: dict[str, str], who: str, rule: str
) -> None:
    path = CAL if who == "ana" else AGENT_CAL
    body = {"to": [_other(who)], "subject": "s", "body": "b", "start_at": _soon(), "rrule": rule}
    began = time.monotonic()
    r = await api.http.post(path, json=body, headers=api.auth(who))
    err = error_of(r)
    assert err["field"] in ("rrule", "start_at"), err
    if rule not in BAD_RULES[-2:]:  # the last two are sound rules with no occurrence
        assert err["field"] == "rrule", err
    entry = world[f"{who}_entry"]
    r = await api.http.patch(f"{path}/{entry}", json={"rrule": rule}, headers=api.auth(who))
    assert error_of(r)["field"] in ("rrule", "start_at")
    assert time.monotonic() - began < 2 * RULE_SECONDS
    got = await api.http.get(f"{path}/{entry}", headers=api.auth(who))
    assert got.status_code == 200 and got.json()["rrule"] is None  # the PATCH wrote nothing


GOOD_RULES = [
    "FREQ=DAILY;COUNT=3",
    "FREQ=WEEKLY;BYDAY=MO,WE,FR",
    "FREQ=MONTHLY;BYDAY=-1FR",
    "FREQ=MONTHLY;BYDAY=+2TU",
    "FREQ=MONTHLY;BYMONTHDAY=-1",
    "FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=1",
    "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
    "FREQ=YEARLY;BYYEARDAY=100",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=HOURLY;INTERVAL=12;UNTIL=20991231T000000Z",
    "FREQ=MINUTELY;INTERVAL=1440",
    "RRULE:freq=daily;wkst=su;interval=2",
]


@pytest.mark.parametrize("rule", GOOD_RULES)
async def test_the_other_side_ordinary_rules_are_still_accepted(
    api: Api, world: dict[str, str], rule: str
) -> None:
    body = {"to": ["claude@/srv/shop"], "subject": "s", "body": "b", "start_at": _soon()}
    r = await api.http.post(CAL, json={**body, "rrule": rule}, headers=api.auth("ana"))
    assert r.status_code == 201, r.text
    assert r.json()["upcoming"], r.json()
