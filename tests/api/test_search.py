"""Full-text search over subject and body, scoped like every read (docs/access.md).

Agents search from the session they work in: `people` gives claude and codex a
scope session in /srv/shop, used when a test names no other."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import select

from mailui4agents.db.tables import ReadLogRow
from mailui4agents.state import Gateway
from tests.conftest import Api, snapshot

pytestmark = pytest.mark.anyio

AGENT = "/api/v1/agent/search"
HUMAN = "/api/v1/search"


def gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def sent(api: Api, sender: str, to: list[str], **extra: Any) -> dict[str, Any]:
    r = await api.send(sender, to, **extra)
    assert r.status_code == 201, r.text
    mail: dict[str, Any] = r.json()
    return mail


SCOPES: dict[str, str] = {}


def scoped(who: str, **params: Any) -> dict[str, Any]:
    return {"session_id": SCOPES[who], **params}


async def found(api: Api, who: str, q: str, **params: Any) -> list[dict[str, Any]]:
    path = HUMAN if api.tokens[who].startswith("am_user_") else AGENT
    if path == AGENT:
        params = scoped(who, **params)
    r = await api.http.get(path, params={"q": q, **params}, headers=api.auth(who))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def subjects(items: list[dict[str, Any]]) -> list[str]:
    return [m["subject"] for m in items]


@snapshot
async def world(api: Api) -> dict[str, str]:
    """Agents claude and codex, users ana and bob; each agent's scope session."""
    await api.agent("claude")
    await api.agent("codex")
    await api.user("ana")
    await api.user("bob")
    scopes = {}
    for agent in ("claude", "codex"):
        r = await api.send("bob", [f"{agent}@/srv/shop.new"], subject="scope", body="-")
        scopes[agent] = r.json()["session_id"]
    return scopes


@pytest.fixture
def people(api: Api, world: dict[str, str]) -> Api:
    SCOPES.clear()
    SCOPES.update(world)  # this test's copy of the world (the ids differ per backend)
    return api


async def test_search_finds_words_of_subject_and_of_body(people: Api) -> None:
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Fix login bug", body="Hello")
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Other", body="the LOGIN page")
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Unrelated", body="nothing")

    assert subjects(await found(people, "claude", "login")) == ["Other", "Fix login bug"]
    assert subjects(await found(people, "claude", "page login")) == ["Other"]  # terms AND-ed
    assert subjects(await found(people, "claude", "log*")) == ["Other", "Fix login bug"]
    assert await found(people, "claude", "log") == []  # whole words unless `*`
    assert subjects(await found(people, "ana", "bug")) == ["Fix login bug"]


async def test_search_matches_unicode_words_and_unspaced_scripts(people: Api) -> None:
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Menü", body="Das Café öffnet")
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Отчёт", body="Привет, мир")
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="重构导入路径", body="请看看")

    assert subjects(await found(people, "claude", "café")) == ["Menü"]
    assert subjects(await found(people, "claude", "CAFE")) == ["Menü"]  # case and accents fold
    assert subjects(await found(people, "claude", "menü")) == ["Menü"]
    assert subjects(await found(people, "claude", "привет")) == ["Отчёт"]
    assert subjects(await found(people, "claude", "导入")) == ["重构导入路径"]  # inside a run
    assert subjects(await found(people, "claude", "导入 请看")) == ["重构导入路径"]


async def test_search_text_is_never_fts_syntax(people: Api) -> None:
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Quote", body='say "hello" OR not')
    for q in ['"hello', 'hello"', "hello OR", "NEAR(hello", "subject:hello", "hello -x", "'a'"]:
        r = await people.http.get(
            AGENT, params=scoped("claude", q=q), headers=people.auth("claude")
        )
        assert r.status_code == 200, (q, r.text)
    assert subjects(await found(people, "claude", '"hello"')) == ["Quote"]
    assert subjects(await found(people, "claude", "OR")) == ["Quote"]  # a word, not an operator


@pytest.mark.parametrize("q", ["", "   ", "*", "-- !!"])
async def test_search_without_words_is_400_naming_q(people: Api, q: str) -> None:
    r = await people.http.get(AGENT, params=scoped("claude", q=q), headers=people.auth("claude"))
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "q"


async def test_search_without_q_is_400_naming_q(people: Api) -> None:
    r = await people.http.get(HUMAN, headers=people.auth("ana"))
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "q"


async def test_search_is_newest_first_with_limit_and_cursor(people: Api) -> None:
    for n in range(5):
        await sent(people, "ana", ["claude@/srv/shop.new"], subject=f"Deploy {n}", body="deploy")
    r = await people.http.get(
        AGENT, params=scoped("claude", q="deploy", limit=2), headers=people.auth("claude")
    )
    page = r.json()
    assert subjects(page["items"]) == ["Deploy 4", "Deploy 3"]
    seen = subjects(page["items"])
    while page["next_cursor"]:
        r = await people.http.get(
            AGENT,
            params=scoped("claude", q="deploy", limit=2, cursor=page["next_cursor"]),
            headers=people.auth("claude"),
        )
        page = r.json()
        seen += subjects(page["items"])
    assert seen == [f"Deploy {n}" for n in (4, 3, 2, 1, 0)]


async def test_search_results_carry_a_marked_snippet_and_the_mail(people: Api) -> None:
    mail = await sent(
        people,
        "ana",
        ["claude@/srv/shop.new"],
        subject="Invoice",
        body="Please pay the invoice for March before Friday.",
    )
    [hit] = await found(people, "claude", "march")
    assert "**March**" in hit["snippet"]
    assert hit["id"] == mail["id"]
    assert hit["reply_address"] == "ana@/srv/shop.claude-invoice"
    assert hit["body"] == "Please pay the invoice for March before Friday."
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="路径", body="请重构导入路径。")
    [cjk] = await found(people, "claude", "导入")
    assert cjk["snippet"] == "请重构**导入**路径。"


async def test_the_database_marks_every_matched_word_of_the_snippet_and_no_other(
    people: Api,
) -> None:
    """The snippet comes from the database on both backends (FTS5's snippet(),
    PostgreSQL's ts_headline): every matched word in it is marked, whole words
    only, accents folded; other words, "logs" for "login" among them, are not."""
    body = (
        " ".join(f"filler{i}" for i in range(40))
        + " the login page broke, login again after the café reopens; logs say nothing "
        + " ".join(f"tail{i}" for i in range(40))
    )
    await sent(people, "ana", ["claude@/srv/shop.new"], subject="Outage report", body=body)

    [hit] = await found(people, "claude", "login")
    snippet = hit["snippet"]
    assert snippet.count("**login**") == 2, snippet  # both, not the first alone
    assert "**" not in snippet.replace("**login**", ""), snippet  # nothing else marked
    assert "filler0 " not in snippet and "tail39" not in snippet, snippet  # a window
    assert len(snippet.split()) <= 20, snippet  # about 16 words, as FTS5's snippet()

    [hit] = await found(people, "claude", "log*")
    marked = re.findall(r"\*\*(.+?)\*\*", hit["snippet"])
    assert "login" in marked and set(marked) <= {"login", "logs"}, hit["snippet"]

    [hit] = await found(people, "claude", "CAFE")
    assert "**café**" in hit["snippet"], hit["snippet"]  # the body's own spelling

    [hit] = await found(people, "claude", "outage")  # the subject matched, not the body
    assert "**" not in hit["snippet"] and hit["snippet"].startswith("filler0"), hit["snippet"]


async def test_scoped_agent_never_sees_mail_of_another_workspace(people: Api) -> None:
    a = await sent(people, "ana", ["claude@/srv/a.new"], subject="Invoice A", body="invoice")
    await sent(people, "ana", ["claude@/srv/b.new"], subject="Invoice B", body="invoice")

    scoped = await found(people, "claude", "invoice", session_id=a["session_id"])
    assert subjects(scoped) == ["Invoice A"]
    assert {m["workspace"] for m in scoped} == {"/srv/a"}
    # Without a scope an agent searches nothing: the boundary is not opt-in.
    r = await people.http.get(AGENT, params={"q": "invoice"}, headers=people.auth("claude"))
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "session_id"


async def test_agent_never_sees_a_session_it_is_not_in(people: Api) -> None:
    a = await sent(people, "ana", ["claude@/srv/a.new"], subject="Invoice A", body="invoice")
    mine = await sent(people, "bob", ["codex@/srv/a.new"], subject="Codex own", body="other")
    assert await found(people, "codex", "invoice") == []
    assert await found(people, "codex", "invoice", session_id=mine["session_id"]) == []
    # Naming someone else's session as one's scope is refused, not widened.
    r = await people.http.get(
        AGENT, params={"q": "invoice", "session_id": a["session_id"]}, headers=people.auth("codex")
    )
    assert r.status_code == 404


async def test_humans_see_only_their_sessions_and_admins_all(people: Api) -> None:
    await sent(people, "ana", ["claude@/srv/a.new"], subject="Ana invoice", body="invoice")
    await sent(people, "bob", ["claude@/srv/a.new"], subject="Bob invoice", body="invoice")
    assert subjects(await found(people, "ana", "invoice")) == ["Ana invoice"]
    assert subjects(await found(people, "bob", "invoice")) == ["Bob invoice"]
    assert subjects(await found(people, "admin", "invoice")) == ["Bob invoice", "Ana invoice"]
    # Agents and humans keep to their own routes.
    r = await people.http.get(AGENT, params={"q": "invoice"}, headers=people.auth("ana"))
    assert r.status_code == 403


async def test_every_search_result_is_in_the_read_log(people: Api) -> None:
    a = await sent(people, "ana", ["claude@/srv/a.new"], subject="Invoice A", body="invoice")
    b = await sent(people, "ana", [a["to"][0]], subject="Invoice A2", body="invoice")
    await sent(people, "ana", ["claude@/srv/b.new"], subject="Invoice B", body="invoice")

    await found(people, "claude", "invoice", session_id=a["session_id"])
    await found(people, "ana", "invoice")
    async with gateway(people).db.read() as s:
        rows = list(await s.scalars(select(ReadLogRow).where(ReadLogRow.action == "search")))
    claude = {(r.mail_id, r.scope_session_id) for r in rows if r.reader == "claude"}
    assert claude == {(a["id"], a["session_id"]), (b["id"], a["session_id"])}
    assert {r.reader_kind for r in rows if r.reader == "claude"} == {"agent"}
    assert len([r for r in rows if r.reader == "ana"]) == 3
