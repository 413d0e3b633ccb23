"""The web UI in a real browser (system Chromium) against a real gateway.

No sleeps: Playwright's expectations wait on the page's DOM with a deadline; the
agent's stream is read until the decision frame arrives (with a deadline)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD
from tests.web.conftest import DESKTOP, PHONE, ROOT, Web

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)


def open_as(
    browser: Browser,
    contexts: list[BrowserContext],
    web: Web,
    name: str,
    password: str = USER_PASSWORD,
    viewport: dict[str, int] = DESKTOP,
    path: str = "/",
) -> tuple[Page, list[str]]:
    """A logged-in page (through the login form) and the dialogs it opens."""
    ctx = browser.new_context(base_url=web.url, viewport=viewport)  # type: ignore[arg-type]
    contexts.append(ctx)
    page = ctx.new_page()
    dialogs: list[str] = []

    def on_dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto(path)
    expect(page).to_have_url(f"{web.url}/login?next={path.replace('/', '%2F')}")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    return page, dialogs


def live(page: Page) -> None:
    """Wait until the page's event stream is open."""
    expect(page.locator("body")).to_have_attribute("data-live", "open")


def request_region(page: Page, tool: str) -> Any:
    """A pending request: a region named with its tool (not the mail announcing it)."""
    return page.get_by_role("article", name=re.compile(rf"^(Approval|Question).*{re.escape(tool)}"))


def agent_events_until(web: Web, agent: str, event: str, match: dict[str, Any]) -> dict[str, Any]:
    """Read the agent's stream from the start of the log until `event` with
    fields `match` arrives (deadline 15 s)."""
    deadline = time.monotonic() + 15
    headers = {**web.auth(agent), "Last-Event-ID": "0"}
    with httpx.stream("GET", f"{web.url}/api/v1/agent/events", headers=headers, timeout=15) as r:
        kind = ""
        for line in r.iter_lines():
            if time.monotonic() > deadline:
                break
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind == event:
                data: dict[str, Any] = json.loads(line.split(":", 1)[1])
                if all(data.get(k) == v for k, v in match.items()):
                    return data
    raise AssertionError(f"no {event} {match} on {agent}'s stream")


def no_horizontal_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width  # type: ignore[index]


def touch_targets_ok(page: Page, scope: str = "main") -> None:
    small = page.evaluate(
        """(scope) => Array.from(document.querySelectorAll(
              scope + ' button, ' + scope + ' a.button, ' + scope + ' select'))
            .filter(e => e.offsetParent !== null)
            .map(e => [e.textContent.trim(), e.getBoundingClientRect()])
            .filter(([t, r]) => r.height < 44 || r.width < 44).map(([t]) => t)""",
        scope,
    )
    assert small == [], small


# --- login, logout, cookie -------------------------------------------------------


def test_login_cookie_logout_and_redirects(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    for path in ("/", "/approvals", "/compose", "/contacts", "/admin", "/sessions/x"):
        r = web.http.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path

    page, _ = open_as(browser, contexts, web, ana)
    cookie = next(c for c in page.context.cookies() if c["name"] == "am_web")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Lax"
    assert cookie["secure"] is False  # plain http here; https: tests/web/test_web_http.py
    assert cookie["expires"] > time.time() + 3600  # it expires, and not before the session
    assert page.evaluate("document.cookie").find("am_web") == -1  # no script reads it

    # Every page has "Log out"; logging out ends the server-side session.
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{web.url}/login")
    stolen = httpx.get(f"{web.url}/", cookies={"am_web": cookie["value"]})
    assert stolen.status_code == 303  # the old cookie is worthless: revoked server-side
    page.goto("/approvals")
    expect(page).to_have_url(f"{web.url}/login?next=%2Fapprovals")


def test_wrong_password_is_refused_then_rate_limited(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """The gateway here allows 3 failures per username (AGENTMAIL_LOGIN_FAILURES_PER_USER)."""
    bob = web.user("bob")
    ctx = browser.new_context(base_url=web.url)
    contexts.append(ctx)
    page = ctx.new_page()
    page.goto("/login")
    for _ in range(3):
        page.get_by_label("Username").fill(bob)
        page.get_by_label("Password").fill("wrong-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_contain_text("wrong username or password")
    page.get_by_label("Username").fill(bob)
    page.get_by_label("Password").fill(USER_PASSWORD)  # right, but over the limit
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("too many login attempts")
    assert not [c for c in ctx.cookies() if c["name"] == "am_web"]


# --- compose, thread, sessions --------------------------------------------------


def test_compose_plan_session_shows_in_thread(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    page, dialogs = open_as(browser, contexts, web, ana, path="/compose")
    to = page.get_by_label("To", exact=True)
    # All but the last two characters: a completion still, and a prefix of no other
    # test's agent on the shared gateway (bot[:4] often was: the first suggestion
    # then depended on which tests had run before).
    to.fill(bot[:-2])
    option = page.get_by_role("option", name=f"{bot}@")
    expect(option).to_be_visible()  # completion from the suggest service
    to.press("ArrowDown")
    to.press("Enter")  # keyboard-navigable
    expect(to).to_have_value(f"{bot}@")
    to.fill(f"{bot}@/srv/planning.new")
    page.get_by_label("Subject").fill("Plan the **migration**")
    page.get_by_label("Body").fill("Steps:\n\n1. read\n2. *think*\n\n`code` here")
    mode = page.get_by_label("Mode", exact=True)
    expect(mode).to_have_value("workspace")  # the default
    mode.select_option("plan")
    page.get_by_role("button", name="Send").click()
    expect(page).to_have_url(re.compile(r"/sessions/[0-9a-f-]+$"))
    mail = page.get_by_role("article", name="Plan the **migration**")
    expect(mail).to_be_visible()
    expect(mail.locator("em")).to_have_text("think")  # Markdown rendered
    expect(mail.locator("code")).to_have_text("code")
    expect(page.locator("#session-chips .chip.mode")).to_have_text("plan")
    expect(page.get_by_role("button", name="Reply")).to_be_visible()
    assert dialogs == []


def test_rename_and_archive(web: Web, browser: Browser, contexts: list[BrowserContext]) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.session_with(ana, bot)
    page, _ = open_as(browser, contexts, web, ana, path=f"/sessions/{sent['session_id']}")
    page.get_by_label("Alias").fill("renamed-by-ana")
    page.get_by_role("button", name="Rename").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("renamed-by-ana")
    enforcement = page.locator("#session-chips .chip.enf")
    expect(enforcement).to_have_attribute("title", re.compile(r"^(native|partial|advisory): "))
    page.get_by_role("button", name="Archive").click()
    expect(page.get_by_role("button", name="Unarchive")).to_be_visible()
    page.goto("/")
    expect(page.locator(f"#g-{sent['session_id']}")).to_have_count(0)
    page.goto("/?archived=1")
    expect(page.locator(f"#g-{sent['session_id']}")).to_contain_text("renamed-by-ana")
    page.goto(f"/sessions/{sent['session_id']}")
    page.get_by_role("button", name="Unarchive").click()
    expect(page.get_by_role("button", name="Archive")).to_be_visible()


# --- approvals and questions, live -----------------------------------------------


def test_live_request_approved_with_note_on_a_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext], artifacts: Path
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.session_with(ana, bot)
    page, dialogs = open_as(browser, contexts, web, ana, viewport=PHONE, path="/approvals")
    live(page)
    expect(page).to_have_title("Approvals — MailUI4Agents")
    asked = web.ask(
        bot,
        sent["session_id"],
        kind="approval",
        tool_name="Bash",
        tool_input={"command": "make deploy TOKEN=sk-live-abcdefghijklmnop1234"},
    )
    region = request_region(page, "Bash")
    expect(region).to_be_visible()  # appeared without a reload
    expect(page).to_have_title("(1) Approvals — MailUI4Agents")
    expect(region.locator("pre.command code")).to_contain_text("make deploy")
    assert "sk-live-abcdefghijklmnop1234" not in region.inner_text()  # masked
    expect(region.locator("time.left")).to_contain_text("left")
    no_horizontal_scroll(page)
    touch_targets_ok(page)
    page.screenshot(path=str(artifacts / "approvals-phone.png"), full_page=True)
    region.get_by_label("Note").fill("ok, but only staging")
    region.get_by_role("button", name="Approve").click()
    expect(region).to_have_count(0)
    expect(page).to_have_title("Approvals — MailUI4Agents")
    decision = agent_events_until(web, bot, "permission_decision", {"request_id": asked["id"]})
    assert decision["decision"] == "approve"
    assert decision["note"] == "ok, but only staging"
    assert decision["decided_by"] == ana
    assert dialogs == []


def test_a_decision_updates_every_open_page(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.session_with(ana, bot)
    first, _ = open_as(browser, contexts, web, ana, path="/approvals")
    second, _ = open_as(browser, contexts, web, ana, path=f"/sessions/{sent['session_id']}")
    live(first)
    live(second)
    web.ask(bot, sent["session_id"], kind="approval", tool_name="Write", tool_input={"x": 1})
    expect(request_region(first, "Write")).to_be_visible()
    expect(request_region(second, "Write")).to_be_visible()  # inline in the thread
    request_region(second, "Write").get_by_role("button", name="Deny").click()
    expect(request_region(first, "Write")).to_have_count(0)  # the other page too


def test_questions_options_and_free_text(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot)["session_id"]
    page, _ = open_as(browser, contexts, web, ana, path="/approvals")
    live(page)
    q1 = web.ask(
        bot,
        sid,
        kind="question",
        tool_name="AskUserQuestion",
        question="Which database?",
        options=[{"label": "SQLite"}, {"label": "PostgreSQL", "description": "the server"}],
    )
    region = request_region(page, "AskUserQuestion")
    expect(region).to_be_visible()
    expect(region.get_by_role("button", name="Approve")).to_have_count(0)
    expect(region.get_by_role("button", name="Deny")).to_have_count(0)
    region.get_by_role("radio", name="PostgreSQL").check()
    region.get_by_role("button", name="Answer").click()
    expect(region).to_have_count(0)
    got = web.http.get(f"/api/v1/agent/permissions/{q1['id']}", headers=web.auth(bot)).json()
    assert got["answers"] == ["PostgreSQL"]

    q2 = web.ask(bot, sid, kind="question", tool_name="AskFreeText", question="Which port?")
    region = request_region(page, "AskFreeText")
    expect(region).to_be_visible()
    answer = region.get_by_role("textbox", name="Answer")
    region.get_by_role("button", name="Answer").click()  # empty: the browser refuses
    assert answer.evaluate("e => e.validity.valueMissing") is True
    answer.evaluate("e => e.removeAttribute('required')")  # and the server refuses too
    answer.fill("   ")
    region.get_by_role("button", name="Answer").click()
    expect(region.get_by_role("alert")).to_contain_text("must not be empty")
    got = web.http.get(f"/api/v1/agent/permissions/{q2['id']}", headers=web.auth(bot)).json()
    assert got["status"] == "pending"
    answer.fill("8080")
    region.get_by_role("button", name="Answer").click()
    expect(region).to_have_count(0)
    got = web.http.get(f"/api/v1/agent/permissions/{q2['id']}", headers=web.auth(bot)).json()
    assert got["answers"] == ["8080"]


def test_collapse_rule_both_ways(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """A new request opens a group its person collapsed earlier; a group collapsed
    after that request arrived stays collapsed (live events and reloads alike)."""
    ana = web.user("ana")
    bot = web.agent("bot")
    sent = web.session_with(ana, bot)
    sid = sent["session_id"]
    page, _ = open_as(browser, contexts, web, ana)
    live(page)
    group = page.locator(f"#g-{sid}")
    expect(group).to_have_attribute("open", "")
    group.locator("> summary").click()  # ana collapses it
    expect(group).not_to_have_attribute("open", "")

    web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "ls"})
    expect(group).to_have_attribute("open", "")  # opened itself
    expect(request_region(page, "Bash")).to_be_visible()

    group.locator("> summary").click()  # collapsed after the request arrived
    expect(group).not_to_have_attribute("open", "")
    alias = sent["session_alias"]
    web.send(bot, [f"{ana}@{sent['workspace']}.{alias}"], subject="progress", from_session_id=sid)
    expect(group.locator(".mail-list")).to_contain_text("progress")  # the live refresh ran
    expect(group).not_to_have_attribute("open", "")  # and left it collapsed
    page.reload()
    live(page)
    expect(group).not_to_have_attribute("open", "")  # a reload too

    web.ask(
        bot,
        sid,
        kind="approval",
        tool_name="Edit",
        tool_input={"old_string": "a", "new_string": "b"},
    )
    expect(group).to_have_attribute("open", "")  # the next new request opens it again
    expect(request_region(page, "Edit").locator("pre.diff")).to_contain_text("+ b")


# --- admin ---------------------------------------------------------------------


def test_admin_adds_an_agent_and_sees_its_key_once(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    boss = web.user("boss", is_admin=True)
    page, _ = open_as(browser, contexts, web, boss, path="/admin")
    name = f"newbot{int(time.time() * 1000) % 100000}"
    page.get_by_label("New agent's name").fill(name)
    page.get_by_role("button", name="Add agent").click()
    key_box = page.get_by_label("Agent key")
    key = key_box.input_value()
    assert key.startswith("am_agent_")
    expect(page.get_by_role("button", name="Copy key")).to_be_visible()
    r = web.http.post(
        "/api/v1/agent/heartbeat",
        json={"platform": "claude-code", "version": "2.1", "mode_enforcement": "native"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.status_code == 200, r.text
    page.goto("/admin")
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    assert key not in page.content()  # never shown again
    page.goto("/contacts")  # the heartbeat made it online, with what it reported
    expect(page.locator(f"#agent-{name}")).to_contain_text("online")
    expect(page.locator(f"#agent-{name}")).to_contain_text("claude-code 2.1")
    expect(page.locator(f"#agent-{name} .chip.enf-native")).to_have_text("native")
    page.goto("/admin")

    page.get_by_label("New user's name").fill(f"carl{name[-5:]}")
    page.get_by_label("New user's password").fill("a-long-password")
    page.get_by_role("button", name="Add user").click()
    carl = f"carl{name[-5:]}"
    expect(page.get_by_role("heading", name=carl)).to_be_visible()

    # Make carl an admin, reset his password; he logs in with the new one and
    # sees the admin page; then his admin is revoked again.
    page.get_by_role("button", name=f"Make {carl} admin").click()
    expect(page.locator(f"#user-{carl} .chip")).to_have_text("admin")
    page.get_by_label(f"New password for {carl}").fill("carls-new-password")
    page.get_by_role("button", name=f"Reset password of {carl}").click()
    expect(page).to_have_url(f"{web.url}/admin")
    carl_page, _ = open_as(
        browser, contexts, web, carl, password="carls-new-password", path="/admin"
    )
    expect(carl_page.get_by_role("heading", name="Admin", level=1)).to_be_visible()
    page.get_by_role("button", name=f"Revoke admin of {carl}").click()
    expect(page.locator(f"#user-{carl} .chip")).to_have_count(0)
    carl_page.reload()
    expect(carl_page.get_by_role("alert")).to_contain_text("admins only")

    # A person who is not an admin gets no admin page.
    plain = web.user("plain")
    other, _ = open_as(browser, contexts, web, plain, path="/admin")
    expect(other.get_by_role("alert")).to_contain_text("admins only")
    expect(other.get_by_role("link", name="Admin")).to_have_count(0)


# --- security ------------------------------------------------------------------

XSS = [
    "<script>window.__xss=1;alert(1)</script>",
    '<img src=x onerror="window.__xss=1;alert(2)">',
    "<svg onload=alert(3)><circle/></svg>",
    "[click](javascript:alert(4))",
    "[x](  javascript:alert(5)  )",
    "<a href='javascript:alert(6)'>a</a>",
    "![img](https://example.invalid/x.png)",
    "[ok](data:text/html;base64,PHNjcmlwdD5hbGVydCg3KTwvc2NyaXB0Pg==)",
    '"><iframe src="javascript:alert(8)">',
    "<details open ontoggle=alert(9)>",
    "[<b>x</b>](jav&#x09;ascript:alert(10))",
]
INJECTED = """() => document.querySelectorAll(
  'main script, main img, main svg, main iframe, main object, main embed, main b,'
  + '[onerror], [onload], [ontoggle], a[href^="javascript"], a[href^="data:"]'
).length"""


def test_xss_corpus_renders_inert(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    evil_agent = web.agent("<script>alert(11)<")
    sent = web.session_with(ana, evil_agent)
    sid, alias, ws = sent["session_id"], sent["session_alias"], sent["workspace"]
    up = web.http.post(
        "/api/v1/agent/attachments",
        files={"file": ("<img src=x onerror=alert(12)>.txt", b"hi", "text/html")},
        headers=web.auth(evil_agent),
    )
    assert up.status_code == 201, up.text
    web.send(
        evil_agent,
        [f"{ana}@{ws}.{alias}"],
        subject="".join(XSS[:3]),
        body="\n\n".join(XSS),
        from_session_id=sid,
        attachment_ids=[up.json()["attachment_id"]],
    )
    web.ask(
        evil_agent,
        sid,
        kind="approval",
        tool_name="<img src=x onerror=alert(13)>",
        tool_input={"command": XSS[0]},
        summary=XSS[1],
    )
    web.ask(
        evil_agent,
        sid,
        kind="question",
        question=XSS[2],
        options=[{"label": XSS[1], "description": XSS[0]}, {"label": "fine"}],
    )
    r = web.http.patch(
        f"/api/v1/sessions/{sid}", json={"alias": "<svg/onload=alert(14)>"}, headers=web.auth(ana)
    )
    assert r.status_code == 200, r.text
    r = web.http.post(
        f"/api/v1/agent/sessions/{sid}/alias-proposal",
        json={"alias": "<img/src=x/onerror=alert(15)>"},
        headers=web.auth(evil_agent),
    )
    assert r.status_code == 200, r.text
    page, dialogs = open_as(browser, contexts, web, ana)
    for path in ("/", f"/sessions/{sid}", "/approvals", "/contacts"):
        page.goto(path)
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        assert page.evaluate(INJECTED) == 0, path
        assert page.evaluate("window.__xss") is None, path
    page.goto(f"/sessions/{sid}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("<svg/onload=alert(14)>")
    expect(page.locator(".proposal code")).to_have_text("<img/src=x/onerror=alert(15)>")
    body = page.locator(".mail .body").last  # the agent's message (requests are cards)
    expect(body).to_contain_text("<script>")  # shown as text
    links = body.locator("a")
    for i in range(links.count()):
        # Where the browser would go: ![img](https://…) is a plain link, and
        # `jav&#x09;ascript:` is kept as `jav%09ascript:…`, a path of this site.
        goes = links.nth(i).evaluate("a => a.href ? new URL(a.href).protocol : ''")
        assert goes in ("", "http:", "https:"), goes
    card = page.get_by_role("article", name=re.compile(r"^Question from "))
    expect(card).to_contain_text("<script>")  # an option's description, as text
    assert dialogs == []
    # The admin pages list the evil agent's name too.
    boss, boss_dialogs = open_as(
        browser, contexts, web, "admin", password=ADMIN_PASSWORD, path="/admin"
    )
    expect(boss.get_by_role("heading", name=evil_agent)).to_be_visible()
    for path in ("/admin", "/contacts", f"/sessions/{sid}"):
        boss.goto(path)
        expect(boss.get_by_role("button", name="Log out")).to_be_visible()
        assert boss.evaluate(INJECTED) == 0, path
        assert boss.evaluate("window.__xss") is None, path
    assert boss_dialogs == []


def test_another_human_cannot_see_or_decide(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    eve = web.user("eve")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot)["session_id"]
    asked = web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "id"})
    page, _ = open_as(browser, contexts, web, eve, path="/approvals")
    expect(page.get_by_text("Nothing is waiting for you.")).to_be_visible()
    resp = page.goto(f"/sessions/{sid}")
    assert resp is not None and resp.status == 404
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    r = page.request.post(
        f"/approvals/{asked['id']}",
        form={"csrf": csrf or "", "decision": "approve", "note": "mine now"},
        max_redirects=0,
    )
    assert r.status == 404, r.text()
    r = page.request.post(
        f"/sessions/{sid}",
        form={"csrf": csrf or "", "action": "mode", "mode": "full"},
        max_redirects=0,
    )
    assert r.status == 404, r.text()
    got = web.http.get(f"/api/v1/agent/permissions/{asked['id']}", headers=web.auth(bot)).json()
    assert got["status"] == "pending"
    # Without the CSRF token even ana's own browser is refused.
    own, _ = open_as(browser, contexts, web, ana, path="/approvals")
    r = own.request.post(f"/approvals/{asked['id']}", form={"decision": "approve"}, max_redirects=0)
    assert r.status == 403
    r = own.request.post(
        f"/approvals/{asked['id']}", form={"decision": "approve", "csrf": "0" * 64}, max_redirects=0
    )
    assert r.status == 403
    got = web.http.get(f"/api/v1/agent/permissions/{asked['id']}", headers=web.auth(bot)).json()
    assert got["status"] == "pending"


# --- accessibility and screenshots ------------------------------------------------


def test_accessibility_and_screenshots(
    web: Web,
    browser: Browser,
    contexts: list[BrowserContext],
    axe_source: str,
    artifacts: Path,
) -> None:
    ana = web.user("ana", is_admin=True)  # the admin page is checked too
    bot = web.agent("claude")
    sent = web.session_with(ana, bot)
    sid = sent["session_id"]
    # The decider's controls in full: a proposed alias and a standing grant.
    r = web.http.post(
        f"/api/v1/agent/sessions/{sid}/alias-proposal",
        json={"alias": "run-the-tests"},
        headers=web.auth(bot),
    )
    assert r.status_code == 200, r.text
    granted = web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "ls"})
    r = web.http.post(
        f"/api/v1/permissions/{granted['id']}/decision",
        json={"decision": "approve", "always": True, "grant_pattern": "ls"},
        headers=web.auth(ana),
    )
    assert r.status_code == 200, r.text
    web.send(
        bot,
        [f"{ana}@{sent['workspace']}.{sent['session_alias']}"],
        subject="Plan ready",
        body="I will:\n\n1. run the tests\n2. fix `lint`\n\nOK?",
        from_session_id=sid,
    )
    web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "pytest -q"})
    web.ask(
        bot,
        sid,
        kind="question",
        question="Which branch?",
        options=[{"label": "main"}, {"label": "dev"}],
    )
    serious: dict[str, list[str]] = {}
    for viewport, tag in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page, _ = open_as(browser, contexts, web, ana, viewport=viewport)
        for path, name in (
            ("/", "mailbox"),
            (f"/sessions/{sid}", "thread"),
            ("/approvals", "approvals"),
            ("/compose", "compose"),
            ("/contacts", "contacts"),
            ("/admin", "admin"),
        ):
            page.goto(path)
            live(page)
            page.screenshot(path=str(artifacts / f"{name}-{tag}.png"), full_page=True)
            if tag == "phone":
                no_horizontal_scroll(page)
                touch_targets_ok(page)
            page.add_script_tag(content=axe_source) if False else page.evaluate(axe_source)
            result = page.evaluate("async () => (await axe.run(document)).violations")
            bad = [
                f"{v['id']}: {v['help']}" for v in result if v["impact"] in ("serious", "critical")
            ]
            if bad:
                serious[f"{path} {tag}"] = bad
    assert serious == {}
    if os.environ.get("AGENTMAIL_UPDATE_DOCS_SCREENSHOTS") != "1":
        return  # the artifacts are enough; the README's copies change only on request
    docs = ROOT / "docs" / "images"
    docs.mkdir(exist_ok=True)
    shutil.copy(artifacts / "mailbox-desktop.png", docs / "web-mailbox.png")
    shutil.copy(artifacts / "approvals-phone.png", docs / "web-approvals-phone.png")


# --- attachments, mode, alias, notifications ----------------------------------------


def test_attachment_upload_with_progress_and_download(
    web: Web, browser: Browser, contexts: list[BrowserContext], tmp_path: Path
) -> None:
    """Upload in compose (the progress bar moves while the bytes go out: the
    upload is throttled over CDP so that it takes about a second), send, then
    download it from the thread, byte for byte."""
    ana = web.user("ana")
    bot = web.agent("bot")
    page, dialogs = open_as(browser, contexts, web, ana, path="/compose")
    payload = os.urandom(600_000)
    source = tmp_path / "report.bin"
    source.write_bytes(payload)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 500_000},
    )
    page.get_by_label("To", exact=True).fill(f"{bot}@/srv/files.new")
    page.get_by_label("Subject").fill("The report")
    page.get_by_label("Body").fill("attached")
    page.get_by_label("Attachments").set_input_files(str(source))
    bar = page.get_by_label("Upload progress")
    expect(bar).to_be_visible()
    # Part of the way: the bar shows progress, not just "done" (polls the DOM).
    page.wait_for_function(
        "() => { const v = document.getElementById('upload-progress').value;"
        " return v > 0 && v < 100; }",
        timeout=10_000,
    )
    attached = page.get_by_role("list", name="Attached files")
    expect(attached).to_contain_text("report.bin (600000 bytes)", timeout=20_000)
    expect(bar).to_have_js_property("value", 100)
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    page.get_by_role("button", name="Send").click()
    expect(page).to_have_url(re.compile(r"/sessions/[0-9a-f-]+$"))
    link = page.get_by_role("list", name="Attachments").get_by_role("link", name="report.bin")
    expect(link).to_be_visible()
    with page.expect_download() as got:
        link.click()
    download = got.value
    assert download.suggested_filename == "report.bin"
    saved = tmp_path / "downloaded.bin"
    download.save_as(saved)
    assert saved.read_bytes() == payload
    # The agent received the same bytes.
    sid = page.url.rsplit("/", 1)[1]
    inbox = web.http.get("/api/v1/agent/inbox", params={"status": "all"}, headers=web.auth(bot))
    mail = next(m for m in inbox.json()["items"] if m["session_id"] == sid)
    att = mail["attachments"][0]
    r = web.http.get(
        f"/api/v1/agent/attachments/{att['attachment_id']}",
        params={"session_id": sid},
        headers=web.auth(bot),
    )
    assert r.status_code == 200 and r.content == payload
    assert dialogs == []


def test_owner_changes_the_mode_and_accepts_an_alias(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    carl = web.user("carl")
    bot = web.agent("bot")
    sent = web.session_with(ana, bot, mode="plan")
    sid = sent["session_id"]
    web.send(
        ana,
        [f"{bot}@{sent['workspace']}.{sent['session_alias']}"],
        cc=[f"{carl}@{sent['workspace']}.{sent['session_alias']}"],
    )
    page, _ = open_as(browser, contexts, web, ana, path=f"/sessions/{sid}")
    live(page)
    chip = page.locator("#session-chips .chip.mode")
    expect(chip).to_have_text("plan")
    page.get_by_label("Session mode").select_option("full")
    page.get_by_role("button", name="Change mode").click()
    expect(chip).to_have_text("full")
    seen = web.http.get(f"/api/v1/agent/sessions/{sid}", headers=web.auth(bot)).json()
    assert seen["permission_mode"] == "full"  # what the agent's hooks apply

    r = web.http.post(
        f"/api/v1/agent/sessions/{sid}/alias-proposal",
        json={"alias": "tidy-imports"},
        headers=web.auth(bot),
    )
    assert r.status_code == 200, r.text
    # It appears without a reload (session_update on the stream).
    expect(page.locator(".proposal")).to_contain_text(f"{bot} proposes the alias tidy-imports")
    page.get_by_role("button", name="Accept alias").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("tidy-imports")
    expect(page.get_by_role("button", name="Accept alias")).to_have_count(0)

    # carl reads the session (cc'd) but decides nothing: no controls, and a
    # forged POST is refused.
    other, _ = open_as(browser, contexts, web, carl, path=f"/sessions/{sid}")
    expect(other.get_by_role("heading", level=1)).to_contain_text("tidy-imports")
    expect(other.get_by_label("Session mode")).to_have_count(0)
    expect(other.get_by_role("button", name="Accept alias")).to_have_count(0)
    csrf = other.locator('meta[name="csrf-token"]').get_attribute("content")
    r2 = other.request.post(
        f"/sessions/{sid}",
        form={"csrf": csrf or "", "action": "mode", "mode": "plan"},
        max_redirects=0,
    )
    assert r2.status == 403
    seen = web.http.get(f"/api/v1/agent/sessions/{sid}", headers=web.auth(bot)).json()
    assert seen["permission_mode"] == "full"


def test_a_plain_decider_always_allows_and_revokes(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """ "Always allow" is the session's deciders' (not only admins'): ana, no admin,
    grants with a pattern, the grant answers the agent's next call, she revokes it."""
    ana = web.user("ana")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot)["session_id"]
    page, _ = open_as(browser, contexts, web, ana, path=f"/sessions/{sid}")
    live(page)
    web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "git status"})
    region = request_region(page, "Bash")
    # The button names what it allows (issue 22, item 5): the command itself, or
    # what the pattern typed into the visible field makes of it.
    always = region.get_by_role("button", name="Always allow")
    expect(always).to_have_text("Always allow `git status` here")
    pattern = region.get_by_label("Pattern for “Always allow”")
    expect(pattern).to_be_hidden()  # folded, under a summary that says what opening does
    region.get_by_text("Change what “Always allow” covers").click()
    expect(pattern).to_be_visible()
    pattern.fill("*")
    expect(always).to_have_text("Always allow every Bash command here")
    pattern.fill("git status")
    expect(always).to_have_text("Always allow `git status` and what follows here")
    always.click()
    expect(region).to_have_count(0)
    again = web.ask(
        bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "git status -s"}
    )
    assert again["status"] == "approved" and again["grant_id"]
    page.reload()
    revoke = page.get_by_role("button", name="Revoke grant Bash git status")
    expect(revoke).to_be_visible()
    revoke.click()
    expect(page.get_by_text("No standing grants in this session.")).to_be_visible()
    third = web.ask(
        bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "git status"}
    )
    assert third["status"] == "pending"


NOTIFICATION_SPY = """(() => {
  const Real = window.Notification;
  window.__notes = [];
  if (!Real) return;
  class Spy extends Real {
    constructor(title, options) {
      window.__notes.push({ title, body: options && options.body });
      super(title, options);
    }
  }
  Object.defineProperty(Spy, "permission", { get: () => Real.permission });
  Spy.requestPermission = (...a) => Real.requestPermission(...a);
  window.Notification = Spy;
  // Once the service worker controls the page, the page notifies through it.
  const proto = window.ServiceWorkerRegistration && ServiceWorkerRegistration.prototype;
  if (!proto) return;
  const show = proto.showNotification;
  proto.showNotification = function (title, options) {
    window.__notes.push({ title, body: options && options.body });
    return show.call(this, title, options);
  };
})();"""


@pytest.mark.parametrize("setting", ["granted", "denied"])
def test_notification_announces_a_new_request_only_when_allowed(
    web: Web, browser: Browser, contexts: list[BrowserContext], setting: str
) -> None:
    """The page calls the Notification API for a new request when the person
    granted the permission (set in the browser context), never when denied. A spy
    around the real constructor and around the service worker's
    showNotification (the page uses it once the worker controls the page)
    records the calls."""
    ana = web.user("ana")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot)["session_id"]
    page, _ = open_as(browser, contexts, web, ana, path="/approvals")
    if setting == "granted":
        page.context.grant_permissions(["notifications"], origin=web.url)
    else:
        # Playwright grants but cannot deny; Chromium's own protocol can.
        cdp = page.context.new_cdp_session(page)
        context_id = cdp.send("Target.getTargetInfo")["targetInfo"]["browserContextId"]
        cdp.send(
            "Browser.setPermission",
            {
                "permission": {"name": "notifications"},
                "setting": "denied",
                "origin": web.url,
                "browserContextId": context_id,
            },
        )
    page.context.add_init_script(NOTIFICATION_SPY)
    page.reload()
    live(page)
    # The worker registers on the first load and claims the page; waiting for it
    # makes the path the same on every run (the one a returning person takes).
    page.wait_for_function("navigator.serviceWorker.controller !== null", timeout=10_000)
    assert page.evaluate("Notification.permission") == setting
    web.ask(bot, sid, kind="approval", tool_name="Bash", tool_input={"command": "make release"})
    expect(request_region(page, "Bash")).to_be_visible()  # the event arrived and was handled
    if setting == "granted":
        # Through the service worker the call comes after its `ready` promise.
        page.wait_for_function("window.__notes.length > 0", timeout=10_000)
    notes = page.evaluate("window.__notes")
    if setting == "granted":
        assert notes == [{"title": "Approval requested", "body": f"{bot}: Bash"}]
        expect(page.get_by_role("link", name="Turn on notifications on this device")).to_be_hidden()
    else:
        assert notes == []
        # Denied is final: the page does not offer to ask again.
        expect(page.get_by_role("link", name="Turn on notifications on this device")).to_be_hidden()


def test_approvals_page_sends_a_person_without_notifications_to_devices(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """While the browser's permission is not given, /approvals links to the one
    place that turns notifications on (permission and push subscription)."""
    ana = web.user("ana")
    page, _ = open_as(browser, contexts, web, ana, path="/approvals")
    assert page.evaluate("Notification.permission") == "default"
    link = page.get_by_role("link", name="Turn on notifications on this device")
    expect(link).to_be_visible()
    link.click()
    expect(page.get_by_role("heading", name="Notifications on this device")).to_be_visible()
    assert page.url.endswith("/devices#push-h")
