"""Pages of mail (mailbox, agent inbox, thread, search) are built from plain rows into
JSON and sent as they are (services/wire_shapes.page_items, api/pages.json_page). This
checks them byte for byte against what the model path gives for the same mails:
`mail_out` on ORM rows, the page validated through the route's response model
and encoded by FastAPI's encoder (TypeAdapter.dump_json, by alias, unset left
out) — the answer these routes gave before. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter
from sqlalchemy import select

from mailui4agents.db.tables import MailRow, ReadLogRow
from mailui4agents.services import mail
from mailui4agents.services.wire_shapes import mail_out
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from mailui4agents.wire.models import (
    Duplicate,
    InboxItem,
    MailOut,
    Page,
    PermissionOut,
    SearchHit,
)
from tests.conftest import ADMIN_PASSWORD, Api, started_app

pytestmark = pytest.mark.anyio

# Text a JSON encoder must escape or keep: quotes, backslashes, control
# characters, non-ASCII in and beyond the BMP, a line separator, markup.
ODD = 'quote " back \\ tab \t nl \n cr \r bell \x07 del \x7f é ß 日本 🙂 \u2028 </script>'


@dataclass
class World:
    api: Api
    gw: Gateway
    parent: str  # the first mail: its thread holds every mail sent below
    session: str


@pytest.fixture
async def world(settings: Settings) -> AsyncIterator[World]:
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            yield await _build(api, app.state.gateway)


async def _upload(api: Api, who: str, name: str, content: bytes) -> str:
    human = api.tokens[who].startswith("am_user_")
    r = await api.http.post(
        f"/api/v1{'' if human else '/agent'}/attachments",
        files={"file": (name, content, "text/plain")},
        headers=api.auth(who),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["attachment_id"])


async def _build(api: Api, gw: Gateway) -> World:
    await api.user("ana")
    await api.user("bob")
    await api.agent("claude")
    files = [await _upload(api, "ana", f"f{i}-{ODD[:6]}.txt", b"x" * (i + 1)) for i in range(2)]
    first = await api.send(
        "ana", ["claude@/srv/shop.new"], cc=["bob@/srv/shop.new"],
        subject=f"first {ODD}", body=f"body {ODD} " + "é" * 30, attachment_ids=files,
    )  # fmt: skip
    assert first.status_code == 201, first.text
    parent, session = first.json()["id"], first.json()["session_id"]
    for i in range(4):
        # bob before ana: the order of positions, not of names or of an index.
        r = await api.send(
            "claude", ["bob@/srv/shop", "ana@/srv/shop"], subject=f"re {i} {ODD}",
            body="🙂" * (10 + i), parent_mail_id=parent,
        )  # fmt: skip
        assert r.status_code == 201, r.text
        # ana to herself and claude: the sender's own copy in her mailbox.
        r = await api.send(
            "ana", ["ana@/srv/shop", "claude@/srv/shop"], subject=f"note {i}",
            body=ODD * (i + 1), parent_mail_id=parent,
        )  # fmt: skip
        assert r.status_code == 201, r.text
    # One read mail in ana's mailbox, the rest unread.
    got = await api.http.get(f"/api/v1/mail/{r.json()['id']}", headers=api.auth("ana"))
    assert got.status_code == 200, got.text
    return World(api, gw, parent, session)


async def _model_bytes(
    w: World,
    reader: str,
    answer: dict[str, Any],
    item: type[BaseModel],
    body_limit: int | None,
) -> bytes:
    """The model path's bytes for the mails `answer` lists, in its order."""
    ids = [i["id"] for i in answer["items"]]
    async with w.gw.read() as s:
        rows = {m.id: m for m in await s.scalars(select(MailRow).where(MailRow.id.in_(ids)))}
        ctxs = await mail.contexts(s, [rows[i] for i in ids])
    page_type: Any = Page[item]  # type: ignore[valid-type]
    items: list[BaseModel] = [mail_out(c, reader, body_limit) for c in ctxs]
    if item is SearchHit:  # as search built its hits; the snippet is the database's
        items = [
            SearchHit.model_validate({**dict(hit), "snippet": listed["snippet"]})
            for hit, listed in zip(items, answer["items"], strict=True)
        ]
    out = page_type(items=items, next_cursor=answer["next_cursor"])
    adapter = TypeAdapter(page_type)
    return adapter.dump_json(adapter.validate_python(out), by_alias=True, exclude_unset=True)


async def _same(
    w: World,
    path: str,
    who: str,
    params: dict[str, Any],
    item: type[BaseModel],
    body_limit: int | None,
) -> dict[str, Any]:
    r = await w.api.http.get(path, params=params, headers=w.api.auth(who))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    answer: dict[str, Any] = r.json()
    assert answer["items"], "an empty page proves nothing"
    assert r.content == await _model_bytes(w, who, answer, item, body_limit)
    return answer


PREVIEW = 4000  # Settings.inbox_preview_chars' default: what a page carries unasked


@pytest.mark.parametrize(
    ("params", "body_limit"),
    [
        ({}, PREVIEW),
        ({"body_limit": 0}, None),
        ({"body_limit": 7, "limit": 3}, 7),  # cut bodies, a next page
        ({"status": "unread", "body_limit": 40}, 40),
        ({"q": "note", "body_limit": 0}, None),
    ],
)
async def test_a_mailbox_page_is_byte_for_byte_the_model_answer(
    world: World, params: dict[str, Any], body_limit: int | None
) -> None:
    answer = await _same(world, "/api/v1/mailbox", "ana", params, InboxItem, body_limit)
    if params.get("limit") == 3:
        assert answer["next_cursor"] is not None
        after = {**params, "cursor": answer["next_cursor"]}
        await _same(world, "/api/v1/mailbox", "ana", after, InboxItem, body_limit)
    if "q" in params:
        assert all(i["subject"].startswith("note") for i in answer["items"])


@pytest.mark.parametrize(
    ("params", "body_limit"),
    [({"status": "all"}, PREVIEW), ({"status": "all", "body_limit": 12}, 12)],
)
async def test_an_agent_inbox_page_is_byte_for_byte_the_model_answer(
    world: World, params: dict[str, Any], body_limit: int | None
) -> None:
    answer = await _same(world, "/api/v1/agent/inbox", "claude", params, InboxItem, body_limit)
    assert any(i["attachments"] for i in answer["items"])


@pytest.mark.parametrize("who", ["ana", "bob", "claude"])
async def test_a_thread_page_is_byte_for_byte_the_model_answer(world: World, who: str) -> None:
    human = world.api.tokens[who].startswith("am_user_")
    path = f"/api/v1{'' if human else '/agent'}/mail/{world.parent}/thread"
    params: dict[str, Any] = {} if human else {"session_id": world.session}
    answer = await _same(world, path, who, params, MailOut, None)
    assert len(answer["items"]) == 9
    # Cut into pages, each one is the model answer too.
    page = await _same(world, path, who, {**params, "limit": 4}, MailOut, None)
    page = await _same(
        world, path, who, {**params, "limit": 4, "cursor": page["next_cursor"]}, MailOut, None
    )
    assert page["next_cursor"] is not None


@pytest.mark.parametrize(
    ("who", "params"),
    [
        ("ana", {"q": "note"}),
        ("ana", {"q": "first"}),  # the mail with attachments
        ("bob", {"q": "re", "limit": 2}),  # a next page
        ("claude", {"q": "note", "session_id": "SESSION"}),
        ("ana", {"q": "日本"}),  # a substring term: the snippet cut in Python on SQLite
    ],
)
async def test_a_search_page_is_byte_for_byte_the_model_answer(
    world: World, who: str, params: dict[str, Any]
) -> None:
    human = world.api.tokens[who].startswith("am_user_")
    path = f"/api/v1{'' if human else '/agent'}/search"
    params = {k: (world.session if v == "SESSION" else v) for k, v in params.items()}
    answer = await _same(world, path, who, params, SearchHit, None)
    for hit in answer["items"]:  # each snippet is cut from its own hit's body
        words = hit["snippet"].replace("**", "").replace("…", " ").split()
        assert words and set(words) <= set(hit["body"].split()), hit["snippet"]
    if params.get("limit") == 2:
        assert answer["next_cursor"] is not None
        await _same(world, path, who, {**params, "cursor": answer["next_cursor"]}, SearchHit, None)
    if params["q"] == "first":
        assert answer["items"][0]["attachments"]
    logged = [row for row in await _logged(world, "search") if row[0] == who]
    assert {row[2] for row in logged} >= {i["id"] for i in answer["items"]}


async def _logged(
    w: World, action: str
) -> list[tuple[str, str, str | None, str | None, str | None]]:
    async with w.gw.read() as s:
        rows = await s.scalars(select(ReadLogRow).where(ReadLogRow.action == action))
        return sorted((r.reader, r.reader_kind, r.mail_id, r.scope_session_id, r.session_id)
                      for r in rows)  # fmt: skip


async def test_every_listed_mail_is_in_the_read_log_and_nothing_else(world: World) -> None:
    w, sid = world, world.session
    r = await w.api.http.get("/api/v1/mailbox", params={"limit": 3}, headers=w.api.auth("ana"))
    listed = sorted(i["id"] for i in r.json()["items"])
    assert len(listed) == 3 and r.json()["next_cursor"] is not None  # more mail, not logged
    assert await _logged(w, "inbox") == [("ana", "user", m, None, sid) for m in listed]
    # An agent's inbox in one session logs that session as the scope.
    r = await w.api.http.get(
        "/api/v1/agent/inbox",
        params={"status": "all", "session_id": sid, "limit": 2},
        headers=w.api.auth("claude"),
    )
    theirs = sorted(i["id"] for i in r.json()["items"])
    logged = [row for row in await _logged(w, "inbox") if row[0] == "claude"]
    assert logged == [("claude", "agent", m, sid, sid) for m in theirs]
    # A thread: every mail of the page, with the reader's scope (none for humans).
    path = f"/api/v1/agent/mail/{w.parent}/thread"
    r = await w.api.http.get(
        path, params={"session_id": sid, "limit": 4}, headers=w.api.auth("claude")
    )
    page = sorted(i["id"] for i in r.json()["items"])
    assert await _logged(w, "thread") == [("claude", "agent", m, sid, sid) for m in page]


async def test_marking_read_marks_exactly_the_listed_mails(world: World) -> None:
    w = world
    auth = w.api.auth("claude")
    path = "/api/v1/agent/inbox"
    before = (await w.api.http.get(path, params={"status": "unread"}, headers=auth)).json()
    assert len(before["items"]) == 5  # the first mail and the four notes
    r = await w.api.http.get(path, params={"mark_read": "true", "limit": 2}, headers=auth)
    marked = [i["id"] for i in r.json()["items"]]
    assert [i["read"] for i in r.json()["items"]] == [False, False]  # the state as listed
    after = (await w.api.http.get(path, params={"status": "unread"}, headers=auth)).json()
    assert [i["id"] for i in after["items"]] == [i["id"] for i in before["items"]][2:]
    everything = (await w.api.http.get(path, params={"status": "all"}, headers=auth)).json()
    assert {i["id"] for i in everything["items"] if i["read"]} == set(marked)
    # Another reader's copies of the same mails keep their state.
    ana = (await w.api.http.get("/api/v1/mailbox", headers=w.api.auth("ana"))).json()
    assert sum(not i["read"] for i in ana["items"]) == 7


@pytest.mark.parametrize(
    ("who", "scoped", "body_limit"),
    [("bob", False, None), ("claude", False, None), ("claude", True, 9), ("claude", True, 0)],
)
async def test_reading_one_mail_is_byte_for_byte_the_model_answer(
    world: World, who: str, scoped: bool, body_limit: int | None
) -> None:
    """A first read (unread until then), as the model path answered it: after
    marking it read. An unscoped agent reads the mails addressed to it."""
    w = world
    human = w.api.tokens[who].startswith("am_user_")
    params: dict[str, Any] = {"session_id": w.session} if scoped else {}
    if body_limit is not None:
        params["body_limit"] = body_limit
    r = await w.api.http.get(
        f"/api/v1{'' if human else '/agent'}/mail/{w.parent}", params=params,
        headers=w.api.auth(who),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["read"] is True and r.json()["attachments"]
    async with w.gw.read() as s:
        row = await s.scalar(select(MailRow).where(MailRow.id == w.parent))
        assert row is not None
        [ctx] = await mail.contexts(s, [row])
    adapter = TypeAdapter(MailOut)
    model = adapter.validate_python(mail_out(ctx, who, body_limit or None))
    assert r.content == adapter.dump_json(model, by_alias=True, exclude_unset=True)
    assert ("read", "claude" if who == "claude" else "bob") in {
        (action, reader) for reader, _, _, _, action in await _all_logged(w)
    }


async def _all_logged(w: World) -> list[tuple[str, str, str | None, str | None, str]]:
    async with w.gw.read() as s:
        rows = await s.scalars(select(ReadLogRow))
        return [(r.reader, r.reader_kind, r.mail_id, r.scope_session_id, r.action) for r in rows]


@pytest.mark.parametrize("who", ["ana", "claude"])
async def test_a_send_answer_is_byte_for_byte_the_model_answer(world: World, who: str) -> None:
    """A send answers with its mail's JSON as it is (api/results.answer), not
    validated and encoded through `MailOut | Duplicate` again: the bytes that path
    gave, for a person's mail and an agent's, with attachments, cc and odd text."""
    api = world.api
    files = [await _upload(api, who, f"s-{ODD[:6]}.txt", b"abc")]
    r = await api.send(
        who, ["bob@/srv/shop", "claude@/srv/shop"] if who == "ana" else ["bob@/srv/shop"],
        cc=["ana@/srv/shop"], subject=f"sent {ODD}", body=f"body {ODD}",
        parent_mail_id=world.parent, attachment_ids=files,
    )  # fmt: skip
    assert r.status_code == 201, r.text
    assert r.headers["content-type"] == "application/json"
    async with world.gw.read() as s:
        row = await s.scalar(select(MailRow).where(MailRow.id == r.json()["id"]))
        assert row is not None
        (ctx,) = await mail.contexts(s, [row])
    adapter: TypeAdapter[Any] = TypeAdapter(MailOut | Duplicate)
    model = adapter.validate_python(mail_out(ctx, who))
    assert r.content == adapter.dump_json(model, by_alias=True, exclude_unset=True)
    assert r.json()["attachments"] and len(r.json()["cc"]) == 1


async def test_a_permission_request_and_its_decision_answer_as_the_model_path(
    world: World,
) -> None:
    """Both answer with their PermissionOut dumped once (api/pages.json_model),
    not validated and encoded through the route's model again: the same bytes as
    that path gives (dump, validate, dump) for what they sent, odd text included."""
    api = world.api
    adapter: TypeAdapter[Any] = TypeAdapter(PermissionOut | Duplicate)

    def model_path(answer: httpx.Response) -> bytes:
        return adapter.dump_json(
            adapter.validate_python(answer.json()), by_alias=True, exclude_unset=True
        )

    asked = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": world.session, "tool_name": "Bash", "relay_key": "bytes-1",
              "tool_input": {"command": f"echo {ODD}", "nested": {"n": [1, 2.5, None]}},
              "summary": f"run {ODD}"},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert asked.status_code == 201, asked.text
    assert asked.headers["content-type"] == "application/json"
    assert asked.content == model_path(asked)
    decided = await api.http.post(
        f"/api/v1/permissions/{asked.json()['id']}/decision",
        json={"decision": "deny", "note": f"no {ODD}"},
        headers=api.auth("ana"),
    )
    assert decided.status_code == 200, decided.text
    assert decided.content == model_path(decided)
    assert decided.json()["status"] == "denied" and decided.json()["note"] == f"no {ODD}"
    # The same request as the listing sends it through the model path: same keys,
    # in the same order, same values (an unset field dumped would show here).
    listed = await api.http.get(
        "/api/v1/permissions", params={"session_id": world.session}, headers=api.auth("ana")
    )
    (item,) = [i for i in listed.json()["items"] if i["id"] == asked.json()["id"]]
    assert list(item.items()) == list(decided.json().items())
    again = await api.http.post(  # the relay key's duplicate: 200, the first request's id
        "/api/v1/agent/permissions",
        json={"session_id": world.session, "tool_name": "Bash", "relay_key": "bytes-1",
              "tool_input": {"command": "x"}},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert again.status_code == 200 and again.json()["request_id"] == asked.json()["id"], again.text
