"""One builder per wire shape (services/wire_shapes.py): a mail is built by `mail_item`
alone; a page is `mail_item` per row, a single mail is a page of one, and the
`new_mail` event is the item without its mail-only fields (wire/models.py
MAIL_ONLY_FIELDS). Adding a field to a mail is one edit in the builder and one
in the wire model (CONTRIBUTING.md, "Adding a mail field"): these tests show a
field added to the builder reaching the page, the single mail and the event."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import EventRow
from mailui4agents.services import wire_shapes
from mailui4agents.wire.models import MAIL_ONLY_FIELDS, MailOut, NewMailEvent
from tests.conftest import Api

pytestmark = pytest.mark.anyio


def _keys(model: type[MailOut] | type[NewMailEvent]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def test_the_event_is_the_mail_without_its_mail_only_fields() -> None:
    """NewMailEvent declares nothing of its own: each of its fields is a MailOut
    field of the same type (only `mail_id` is required there), and together they
    are exactly the mail's fields but MAIL_ONLY_FIELDS."""
    assert set(MAIL_ONLY_FIELDS) <= set(_keys(MailOut))
    assert (
        tuple(k for k in _keys(MailOut) if k not in MAIL_ONLY_FIELDS) == wire_shapes.NEW_MAIL_FIELDS
    )
    assert set(_keys(NewMailEvent)) == set(wire_shapes.NEW_MAIL_FIELDS)
    for name, event_field in NewMailEvent.model_fields.items():
        mail_field = MailOut.model_fields[name]
        if name == "mail_id":
            assert mail_field.annotation == str | None and event_field.annotation is str
        else:
            assert event_field.annotation == mail_field.annotation, name


async def _world(api: Api) -> tuple[str, str, dict[str, Any]]:
    """ana's mail to claude: its id, session and the send answer (`mail_out`)."""
    await api.user("ana")
    await api.agent("claude")
    r = await api.send("ana", ["claude@/srv/shop.new"], subject="Build", body="make it so")
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["session_id"], r.json()


async def _events(api: Api, principal: str) -> list[dict[str, Any]]:
    gw = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    async with gw.db.read() as s:
        rows = await s.scalars(
            select(EventRow).where(EventRow.principal == principal, EventRow.type == "new_mail")
        )
        return [dict(r.data) for r in rows]


async def test_a_single_mail_is_its_page_item_byte_for_byte(api: Api) -> None:
    """The same mail read alone and listed in a thread and an inbox: the same
    object, key for key in MailOut's order (read state aside: reading marks it)."""
    mail_id, session_id, sent = await _world(api)
    auth = api.auth("claude")
    inbox = (await api.http.get("/api/v1/agent/inbox", headers=auth)).json()["items"]
    one = await api.http.get(
        f"/api/v1/agent/mail/{mail_id}", params={"session_id": session_id}, headers=auth
    )
    thread = await api.http.get(
        f"/api/v1/agent/mail/{mail_id}/thread", params={"session_id": session_id}, headers=auth
    )
    single = one.json()
    [listed] = [i for i in thread.json()["items"] if i["id"] == mail_id]
    assert list(single) == list(listed) == list(inbox[0]) == _keys(MailOut)
    assert single == listed == {**inbox[0], "read": True}
    # The sender's copy, as the send answers it: the same mail seen by ana.
    assert list(sent) == _keys(MailOut)
    assert sent["self_address"] == sent["from"] != single["self_address"]
    [event] = await _events(api, "agent:claude")
    assert event == {k: single[k] for k in wire_shapes.NEW_MAIL_FIELDS}


async def test_a_field_added_to_the_builder_reaches_page_single_mail_and_event(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one edit in the builder, made here by wrapping `mail_item`: the new
    field is in a page, in a single mail, in the send answer and in the
    `new_mail` event, with no other edit (MailOut keeps it as an extra until its
    declaration, the other edit, gives it a type)."""
    built = wire_shapes.mail_item

    def with_priority(*args: Any, **kwargs: Any) -> dict[str, Any]:
        item = built(*args, **kwargs)
        return {**item, "priority": f"p-{item['subject']}"}

    monkeypatch.setattr(wire_shapes, "mail_item", with_priority)
    mail_id, session_id, sent = await _world(api)
    assert sent["priority"] == "p-Build"
    auth = api.auth("claude")
    page = (await api.http.get("/api/v1/agent/inbox", headers=auth)).json()["items"]
    assert [i["priority"] for i in page] == ["p-Build"]
    single = await api.http.get(
        f"/api/v1/agent/mail/{mail_id}", params={"session_id": session_id}, headers=auth
    )
    assert single.json()["priority"] == "p-Build"
    [event] = await _events(api, "agent:claude")
    assert event["priority"] == "p-Build"
    assert NewMailEvent.model_validate(event).model_extra == {"priority": "p-Build"}
