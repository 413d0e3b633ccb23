"""A request mail in the thread is shown as its request (a card: agent, tool,
workspace, the input made readable, its state, the decision form while pending),
mail types are named in words, and the thread page loads its requests in one
query. In-process (fast); the browser half is tests/web/test_browser_cards.py."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import update

from mailui4agents.db.tables import PermissionRow
from mailui4agents.domain.mail_types import MailType
from mailui4agents.services import scheduler
from mailui4agents.web.render import TYPE_WORDS, request_state, tool_view, type_word
from mailui4agents.web.shapes import RequestCard
from tests.api.test_content_limits import statements
from tests.conftest import ADMIN_PASSWORD, Api
from tests.web.test_web_admin_sessions import Browser, browser

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src" / "mailui4agents"


async def _world(api: Api) -> dict[str, Any]:
    """ana owns a session with bot in /srv/shop and cc'd carl in; eve is in none of it."""
    for name in ("ana", "carl", "eve"):
        await api.user(name)
    await api.agent("bot", owners=["ana"])
    first = (await api.send("ana", ["bot@/srv/shop.new"], subject="Clean up")).json()
    here = f"/srv/shop.{first['session_alias']}"
    r = await api.send("ana", [f"bot@{here}"], cc=[f"carl@{here}"], subject="carl too")
    assert r.status_code == 201, r.text
    return {"sid": first["session_id"], "first": first, "here": here}


async def _ask(api: Api, sid: str, **body: Any) -> dict[str, Any]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": uuid.uuid4().hex, **body},
        headers=api.auth("bot"),
    )
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _card(page: str, request_id: str) -> str:
    """The card of the request (`<article id="req-ID…">` to its end), or ""."""
    m = re.search(
        rf'<article class="request[^"]*" id="req-{request_id}[^"]*".*?</article>', page, re.S
    )
    return m.group(0) if m else ""


def _text(fragment: str) -> str:
    """What a person reads: the markup's text, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


async def _thread(who: Browser, sid: str) -> str:
    page = await who.http.get(f"/sessions/{sid}")
    assert page.status_code == 200, page.text
    return page.text


def _gateway(api: Api) -> Any:
    return api.http._transport.app.state.gateway  # type: ignore[attr-defined]


async def _set(api: Api, request_id: str, **values: Any) -> None:
    async with _gateway(api).write() as s:
        await s.execute(
            update(PermissionRow).where(PermissionRow.id == request_id).values(**values)
        )


# --- the card, pending and decided ----------------------------------------------------


async def test_a_pending_request_is_a_card_with_the_buttons_not_its_mail_text(api: Api) -> None:
    w = await _world(api)
    asked = await _ask(
        api, w["sid"], tool_name="Bash", tool_input={"command": "npm test -- --ci"},
        summary="run the tests",
    )  # fmt: skip
    async with browser(api, "ana") as ana:
        page = await _thread(ana, w["sid"])
        card = _card(page, asked["id"])
        assert card, page
        text = _text(card)
        assert text.startswith("Approval: Bash from bot"), text
        assert "approval request" in text and "/srv/shop" in text
        assert "pending Waiting for a decision" in text and "left" in text
        assert '<pre class="tool command" aria-label="Tool input"><code>npm test -- --ci' in card
        for button in ('value="approve"', 'value="deny"', 'value="always"'):
            assert button in card, button
        # The mail's own text (JSON, CLI lines) is not on the page.
        assert "agentmail approve" not in page and "agentmail deny" not in page
        assert "wants to use Bash" not in page
        # One card per request: the list above the thread links to it.
        assert page.count(f'id="req-{asked["id"]}"') == 1
        assert f'href="#req-{asked["id"]}"' in page
        # The form works without JavaScript: it carries the page's CSRF token.
        form = re.search(
            r'<form method="post" action="/approvals/[^"]+" class="decide">.*?</form>', card, re.S
        )
        assert form is not None
        fields = dict(
            re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(0))
        )
        assert fields["csrf"] == ana.csrf, fields
        r = await ana.http.post(
            f"/approvals/{asked['id']}",
            data={**fields, "decision": "approve", "note": ""},
        )
        assert r.status_code == 303 and r.headers["location"] == f"/sessions/{w['sid']}", r.text
        page = await _thread(ana, w["sid"])
    card = _card(page, asked["id"])
    text = _text(card)
    assert text.startswith("Approved: Bash from bot"), text
    assert "Approved by ana from the web" in text  # the channel the web names (decided_channel)
    assert 'class="decide"' not in card and 'value="approve"' not in card  # no buttons now
    assert "npm test -- --ci" in card  # what was approved stays on the card
    assert f'id="req-{asked["id"]}-approved"' in card  # a new id: live pages swap it in
    assert f'href="#req-{asked["id"]}"' not in page  # nothing pending to jump to


async def test_a_denied_request_shows_who_denied_it_and_the_note(api: Api) -> None:
    w = await _world(api)
    asked = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": "rm -rf build"})
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/approvals/{asked['id']}", decision="deny", note="not on prod")
        assert r.status_code == 303, r.text
        page = await _thread(ana, w["sid"])
    text = _text(_card(page, asked["id"]))
    assert text.startswith("Denied: Bash from bot"), text
    assert "Denied by ana from the web: not on prod" in text, text
    # The receipt under it is one line, linking to the request's mail.
    receipt = re.search(
        r'<li id="m-[^"]+" class="mail compact type-permission_decision">.*?</li>', page, re.S
    )
    assert receipt is not None, page
    assert f'href="#m-{asked["mail_id"]}"' in receipt.group(0)
    assert "decision" in _text(receipt.group(0)) and "Denied: Bash" in receipt.group(0)


async def test_where_a_decision_came_from_is_named(api: Api) -> None:
    """decided_device (a paired phone) wins over the channel; each channel in words."""
    w = await _world(api)
    asked = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": "make"})
    async with browser(api, "ana") as ana:
        assert (await ana.post(f"/approvals/{asked['id']}", decision="approve")).status_code == 303
        for channel, device, words in (
            ("push", "Ana's phone", "Approved by ana from Ana's phone"),
            ("web", None, "Approved by ana from the web"),
            ("push", None, "Approved by ana from a notification"),
            ("terminal", None, "Approved by ana from the terminal"),
        ):
            await _set(api, asked["id"], decided_channel=channel, decided_device=device)
            text = _text(_card(await _thread(ana, w["sid"]), asked["id"]))
            assert words in text, (channel, device, text)


async def test_a_timed_out_and_a_cancelled_request_say_so(api: Api) -> None:
    w = await _world(api)
    late = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": "sleep 1"})
    from mailui4agents.db.types import utcnow

    await _set(api, late["id"], expires_at=utcnow())  # due: the page expires it
    async with browser(api, "ana") as ana:
        page = await _thread(ana, w["sid"])
        text = _text(_card(page, late["id"]))
        assert text.startswith("Timed out: Bash from bot"), text
        assert "Timed out: nobody decided in time" in text
        assert 'class="decide"' not in _card(page, late["id"])
        left = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": "ls"})
        r = await ana.post(f"/sessions/{w['sid']}", action="archive")
        assert r.status_code == 303, r.text
        text = _text(_card(await _thread(ana, w["sid"]), left["id"]))
    assert text.startswith("Cancelled: Bash from bot") and "Cancelled by ana" in text, text


async def test_a_question_card_shows_its_options_then_the_answer(api: Api) -> None:
    w = await _world(api)
    asked = await _ask(
        api, w["sid"], kind="question", question="Which database?",
        options=[{"label": "SQLite"}, {"label": "PostgreSQL", "description": "the server"}],
    )  # fmt: skip
    async with browser(api, "ana") as ana:
        card = _card(await _thread(ana, w["sid"]), asked["id"])
        assert _text(card).startswith("Question from bot"), card
        assert 'type="radio" name="answers" value="PostgreSQL"' in card
        assert 'value="approve"' not in card and 'value="deny"' not in card
        assert "question" in _text(card)  # its type in words
        r = await ana.post(f"/approvals/{asked['id']}", decision="answer", answers="PostgreSQL")
        assert r.status_code == 303, r.text
        page = await _thread(ana, w["sid"])
    text = _text(_card(page, asked["id"]))
    assert text.startswith("Answered: question from bot"), text
    assert "Answered by ana from the web: PostgreSQL" in text, text
    assert "Which database?" in text and "agentmail answer" not in page


async def test_an_edit_is_shown_as_its_file_and_a_diff_json_only_folded(api: Api) -> None:
    w = await _world(api)
    edit = await _ask(
        api, w["sid"], tool_name="Edit",
        tool_input={"file_path": "/srv/shop/app.py", "old_string": "a = 1", "new_string": "a = 2"},
    )  # fmt: skip
    odd = await _ask(api, w["sid"], tool_name="Custom", tool_input={"x": [1, 2]})
    async with browser(api, "ana") as ana:
        page = await _thread(ana, w["sid"])
    card = _card(page, edit["id"])
    assert "File" in _text(card) and "<code>/srv/shop/app.py</code>" in card
    assert '<pre class="tool diff" aria-label="Tool input"><code>- a = 1\n+ a = 2</code>' in card
    assert "<details" not in card.split('<form method="post"')[0]  # the edit says it all
    card = _card(page, odd["id"])
    assert re.search(r'<details class="whole"><summary>Show the input \(JSON\)</summary>', card)


# --- who sees it ----------------------------------------------------------------------


async def test_nobody_else_sees_a_card_or_its_buttons(api: Api) -> None:
    """Negative controls: carl (cc'd, no decider) and an admin (reads every
    session, decides none here) see the mail without input and no card; eve,
    not in the session, gets 404."""
    w = await _world(api)
    secret = "zebrasecret"
    asked = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": f"cat /{secret}"})
    for who, password in (("carl", None), ("admin", ADMIN_PASSWORD)):
        async with browser(api, who, *([password] if password else [])) as other:
            page = await _thread(other, w["sid"])
            assert _card(page, asked["id"]) == "", who
            assert secret not in page and 'class="decide"' not in page, who
            assert f'action="/approvals/{asked["id"]}"' not in page, who
            assert "bot asked the session's deciders to use Bash" in page, who
            assert ">approval request</span> Approval needed: Bash" in page, who  # in words
    async with browser(api, "eve") as eve:
        r = await eve.http.get(f"/sessions/{w['sid']}")
        assert r.status_code == 404 and secret not in r.text
    async with browser(api, "ana") as ana:  # the positive control
        assert secret in _card(await _thread(ana, w["sid"]), asked["id"])


# --- one query for the page -------------------------------------------------------------


async def _cost(api: Api, who: Browser, sid: str) -> tuple[int, int]:
    """Statements of one thread page (after a first visit marked its mail read):
    all of them, and those on the requests table."""
    await _thread(who, sid)
    with statements(_gateway(api)) as seen:
        await _thread(who, sid)
    return len(seen), sum(1 for _, sql in seen if "FROM permissions" in sql)


async def test_the_thread_page_loads_its_requests_in_one_query(api: Api) -> None:
    """The thread page costs as many statements with one request mail as with
    five (two of them decided, with their receipts): the cards are one SELECT
    for the page, not one per mail."""
    w = await _world(api)
    async with browser(api, "ana") as ana:
        first = await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": "ls"})
        one = await _cost(api, ana, w["sid"])
        more = [
            await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": f"ls {i}"})
            for i in range(4)
        ]
        for done in more[:2]:
            assert (await ana.post(f"/approvals/{done['id']}", decision="deny")).status_code == 303
        five = await _cost(api, ana, w["sid"])
        page = await _thread(ana, w["sid"])
    assert all(_card(page, r["id"]) for r in [first, *more])
    assert one == five, (one, five)


# --- mail types in words ----------------------------------------------------------------


def test_every_stored_mail_type_has_words() -> None:
    """Every type a mail can have (domain/mail_types.MailType: the services write
    only its members, tests/architecture/test_one_shape.py) is named in words."""
    types = set(MailType)
    assert types <= set(TYPE_WORDS), types - set(TYPE_WORDS)
    words: dict[str, str] = {t: type_word(t) for t in types}
    assert all("_" not in w for w in words.values()), words
    assert words["permission_request"] == "approval request"
    assert type_word("permission_request", "question") == "question"
    assert words["permission_decision"] == "decision"
    assert words["calendar"] == "calendar entry" and words["failure"] == "failure report"
    assert type_word("some_new_type") == "some new type"  # never the raw value


async def test_mail_types_are_named_in_words_in_the_mailbox_and_the_thread(api: Api) -> None:
    w = await _world(api)
    sid, to_ana = w["sid"], [f"ana@{w['here']}"]
    bot = api.auth("bot")
    for extra in ({"relay": True, "relay_key": uuid.uuid4().hex}, {"type": "failure"}):
        r = await api.http.post(
            "/api/v1/agent/mail",
            json={"to": to_ana, "subject": f"typed {extra}", "body": "b", **extra},
            headers=bot,
        )
        assert r.status_code == 201, r.text
    at = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=0)
    r = await api.http.post(
        "/api/v1/calendar",
        json={"to": [f"bot@{w['here']}"], "subject": "standup", "body": "b",
              "start_at": at.isoformat()},
        headers=api.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    assert await scheduler.deliver_calendar(_gateway(api), at) == 1
    asked = await _ask(api, sid, tool_name="Bash", tool_input={"command": "ls"})
    await _ask(api, sid, kind="question", question="Which one?")
    r = await api.http.post(
        "/api/v1/agent/sessions/interactive",
        json={"platform_id": uuid.uuid4().hex, "owner": "ana", "cwd": "/srv/term"},
        headers=bot,
    )
    assert r.status_code == 200, r.text
    terminal = r.json()["id"]
    async with browser(api, "ana") as ana:
        assert (await ana.post(f"/approvals/{asked['id']}", decision="approve")).status_code == 303
        chips = {
            "thread": re.findall(r'class="chip type">([^<]+)<', await _thread(ana, sid)),
            "terminal": re.findall(r'class="chip type">([^<]+)<', await _thread(ana, terminal)),
            "mailbox": re.findall(r'class="chip type">([^<]+)<', (await ana.http.get("/")).text),
        }
    for where, words in (
        (
            "thread",
            {
                "agent reply",
                "failure report",
                "approval request",
                "question",
                "decision",
                "calendar entry",
            },
        ),
        ("terminal", {"session notice"}),
        ("mailbox", {"agent reply", "failure report", "approval request", "question"}),
    ):
        assert words <= set(chips[where]), (where, chips[where])
    for where, found in chips.items():
        assert not [c for c in found if "_" in c], (where, found)  # never a stored value


def test_request_state_words() -> None:
    base: dict[str, Any] = {"kind": "approval", "decided_by": "ana", "decided_at": None}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"status": "pending", "decided_by": None}, "", "Waiting for a decision"),
        ({"status": "approved", "decided_channel": "web"}, "Approved",
         "Approved by ana from the web"),
        ({"status": "approved", "decided_via": {"channel": "push", "device": "Ana's phone"}},
         "Approved", "Approved by ana from Ana's phone"),
        ({"status": "denied", "note": "no"}, "Denied", "Denied by ana"),
        ({"status": "approved", "decided_by": "grant:g1"}, "Approved",
         "Approved by a standing grant (“Always allow”)"),
        ({"status": "expired", "decided_by": "system"}, "Timed out",
         "Timed out: nobody decided in time"),
        ({"status": "cancelled", "decided_by": "ana"}, "Cancelled", "Cancelled by ana"),
        ({"status": "cancelled", "decided_by": "bot", "decided_channel": "terminal"},
         "Answered in the terminal", "Answered in the terminal"),
        ({"status": "approved", "kind": "question", "answers": ["a"]}, "Answered",
         "Answered by ana"),
    ]  # fmt: skip
    for values, word, line in cases:
        state = request_state(cast(RequestCard, {**base, **values}))
        assert (state["word"], state["line"]) == (word, line), values


def test_tool_inputs_are_shown_readably() -> None:
    view = tool_view({"command": "make test"})
    assert (view["kind"], view["text"], view["json"]) == ("command", "make test", None)
    view = tool_view({"file_path": "/a.py", "content": "\n".join(map(str, range(30)))})
    assert (view["kind"], view["path"], view["more"]) == ("content", "/a.py", 18)
    assert view["json"] is not None  # cut: the whole input is one click away
    view = tool_view({"file_path": "/a.py", "edits": [{"old_string": "x", "new_string": "y"}]})
    assert (view["kind"], view["text"]) == ("diff", "- x\n+ y")
    view = tool_view({"file_path": "/a.py"})
    assert (view["kind"], view["path"], view["path_label"]) == ("path", "/a.py", "File")
    view = tool_view({"x": 1})
    assert view["kind"] == "json" and '"x": 1' in view["text"]
