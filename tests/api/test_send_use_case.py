"""Sending is one use case (services/sending.py) behind the person's and the
agent's mail routes and the web UI's compose: its result names the events it
wrote, exactly those the event log then holds."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from mailui4agents.db.tables import EventRow
from mailui4agents.domain.results import Duplicate, Sent
from mailui4agents.services import identity, sending
from mailui4agents.state import Gateway
from tests.conftest import Api

pytestmark = pytest.mark.anyio


def _gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def test_a_send_names_the_events_it_wrote_and_a_duplicate_none(api: Api) -> None:
    await api.user("ana")
    await api.user("carl")
    await api.agent("bot", owners=["ana"])
    gw = _gateway(api)
    async with gw.read() as s:
        ana = await identity.authenticate(s, api.tokens["ana"])
        bot = await identity.authenticate(s, api.tokens["bot"])
        head = await s.scalar(select(func.coalesce(func.max(EventRow.id), 0)))
    assert ana is not None and bot is not None

    # carl twice (to and cc): one delivery, one event.
    here = "/srv/shop.new"
    draft = sending.Draft(
        to=[f"bot@{here}", f"carl@{here}"], cc=[f"carl@{here}"], subject="Clean up", body="b"
    )
    sent = await sending.send(gw, ana, draft)
    assert isinstance(sent.outcome, Sent)
    async with gw.read() as s:
        rows = (await s.scalars(select(EventRow).where(EventRow.id > head))).all()
    written = sorted((r.principal, r.type) for r in rows)
    assert sorted((e.principal, e.type) for e in sent.events) == written
    assert written == [("agent:bot", "new_mail"), ("user:carl", "new_mail")]

    at = f"/srv/shop.{sent.outcome.mail.session_alias}"
    reply = sending.Draft(
        to=[f"ana@{at}"],
        subject="Re: Clean up",
        body="done",
        parent_mail_id=sent.outcome.mail.id,
        relay_key=uuid.uuid4().hex,
    )
    first = await sending.send(gw, bot, reply)
    assert [(e.principal, e.type) for e in first.events] == [("user:ana", "new_mail")]
    again = await sending.send(gw, bot, reply)
    assert isinstance(again.outcome, Duplicate) and again.events == ()
