"""The JSON the pages read, typed.

A mail (a page row of services/reading.py: JSON already, for speed) and a
permission request (PermissionOut's JSON form, `to_json`) reach the templates as
the very objects a client of the API receives: their times are RFC 3339 strings
and the templates put them in `datetime` attributes as they are. These
TypedDicts name the keys of those objects that the web layer reads, so a
misspelt key is a type error; at run time they are the plain dicts.
tests/web/test_shapes.py checks that each key is a field of its wire model.

Shapes that reach the templates as models (SessionOut, GrantOut, AgentOut, …)
are not here: see web/data.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict, cast

from mailui4agents.wire.models import JsonObject, PermissionOut, to_json

# MailOut's JSON form ("from" is a keyword, hence the call syntax).
MailJson = TypedDict(
    "MailJson",
    {
        "id": str,
        "session_id": str,
        "type": str,
        "from": str,
        "from_name": str | None,
        "to": list[str],
        "cc": list[str],
        "subject": str,
        "body": str,
        "read": bool,
        "created_at": str,
        "parent_mail_id": str | None,
        "reply_address": str | None,
        "attachments": list[JsonObject],
    },
    total=False,
)


class DecidedViaJson(TypedDict, total=False):
    """DecidedVia's JSON form."""

    channel: str
    device: str | None


class RequestJson(TypedDict, total=False):
    """PermissionOut's JSON form (only the fields it was given: `to_json`)."""

    id: str
    session_id: str
    kind: str
    agent: str
    tool_name: str | None
    tool_input: JsonObject | None
    summary: str | None
    question: str | None
    options: list[JsonObject] | None
    multi_select: bool
    status: str
    decision: str | None
    note: str | None
    answers: list[str] | None
    decided_by: str | None
    decided_at: str | None
    decided_via: DecidedViaJson | None
    expires_at: str | None
    mail_id: str | None
    grant_id: str | None
    created_at: str


class RequestCard(RequestJson, total=False):
    """A request as the thread shows it on its mail (services/request_cards.py):
    for the session's deciders its JSON with where it was asked and how it was
    decided, and `card`; for anyone else only its `kind`."""

    session_alias: str | None
    workspace: str | None
    permission_mode: str | None
    decided_channel: str | None
    decided_device: str | None
    card: bool


def request_json(p: PermissionOut) -> RequestJson:
    """`p` as a client of the API receives it."""
    return cast(RequestJson, to_json(p))


def mail_json(items: list[JsonObject]) -> list[MailJson]:
    """Page rows of services/reading.py, which are MailOut's JSON form already."""
    return cast(list[MailJson], items)


@dataclass(frozen=True, slots=True)
class ContactView:
    """A contact (ContactOut) on the contacts page, with whether it is online."""

    name: str
    kind: str
    last_address: str
    unread: int
    online: bool
