"""The typed JSON the pages read (web/shapes.py, web/notify_page.py) names only
keys that its wire model sends: a key renamed in the model fails here, not as
an empty spot on a page."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import BaseModel

from mailui4agents.domain.notify_policy import SETTABLE
from mailui4agents.domain.times import rfc3339
from mailui4agents.services.notify_policy import PolicySettings
from mailui4agents.web.notify_page import PolicyForm
from mailui4agents.web.render import short_time
from mailui4agents.web.shapes import (
    ContactView,
    DecidedViaJson,
    MailJson,
    RequestCard,
    RequestJson,
)
from mailui4agents.wire.models import ContactOut, DecidedVia, MailOut, PermissionOut
from mailui4agents.wire.notify import NotifyPolicyOut


def json_keys(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


# What a card adds to a request (services/request_cards.py, web/data.thread_requests).
CARD_KEYS = {
    "session_alias",
    "workspace",
    "permission_mode",
    "decided_channel",
    "decided_device",
    "card",
}


@pytest.mark.parametrize(
    ("shape", "model", "added"),
    [
        (MailJson, MailOut, set()),
        (RequestJson, PermissionOut, set()),
        (RequestCard, PermissionOut, CARD_KEYS),
        (DecidedViaJson, DecidedVia, set()),
    ],
)
def test_each_key_is_one_the_model_sends(
    shape: type, model: type[BaseModel], added: set[str]
) -> None:
    unknown = set(shape.__annotations__) - json_keys(model) - added
    assert not unknown, (shape.__name__, unknown)


def test_a_contact_view_is_a_contact_and_whether_it_is_online() -> None:
    names = {f.name for f in fields(ContactView)}
    assert names - json_keys(ContactOut) == {"online"}


def test_the_policy_settings_are_what_a_person_sets_and_the_api_answers() -> None:
    assert set(PolicySettings.__annotations__) == set(SETTABLE) == json_keys(NotifyPolicyOut)
    assert set(PolicyForm.__annotations__) == set(SETTABLE)


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(hours=2)])
def test_a_time_shows_the_same_from_a_model_as_from_its_json(offset: timedelta) -> None:
    when = datetime(2026, 12, 2, 13, 45, 7, 123456, tzinfo=UTC).astimezone(timezone(offset))
    assert short_time(when) == short_time(rfc3339(when)) != ""
    assert short_time(None) == ""
