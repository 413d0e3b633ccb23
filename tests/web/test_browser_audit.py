"""The "Audit" page in a real browser (system Chromium) against a real gateway
(docs/audit.md; docs/web.md, the page table): a person's decisions listed newest first,
filtered by outcome, agent and session from the form and the row links; the
input shown escaped; on a phone without horizontal scroll; no serious or
critical axe finding; another person sees none of it.

No sleeps: Playwright's expectations wait on the DOM with a deadline."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.web.conftest import PHONE, Web
from tests.web.test_browser import no_horizontal_scroll, open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)

XSS = "<img src=x onerror=alert(1)>"


def test_the_audit_page_lists_filters_and_escapes(
    web: Web, browser: Browser, contexts: list[BrowserContext], axe_source: str
) -> None:
    ana, dan = web.user("ana"), web.user("dan")
    bot, other = web.agent("claude"), web.agent("codex")
    sid = web.session_with(ana, bot)["session_id"]
    sid2 = web.session_with(ana, other)["session_id"]
    for agent, session, command, decision in (
        (bot, sid, "make test", "approve"),
        (bot, sid, f"echo {XSS}", "deny"),
        (other, sid2, "cargo build", "approve"),
    ):
        asked = web.ask(agent, session, tool_name="Bash", tool_input={"command": command})
        r = web.http.post(
            f"/api/v1/permissions/{asked['id']}/decision",
            json={"decision": decision, "note": f"{decision} it"},
            headers=web.auth(ana),
        )
        assert r.status_code == 200, r.text

    page, dialogs = open_as(browser, contexts, web, ana, path="/audit", viewport=PHONE)
    rows = page.locator(".audit-row")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("cargo build")  # newest first
    expect(rows.nth(1).locator("code.what")).to_have_text(f"echo {XSS}")  # text, not markup
    expect(rows.nth(1)).to_contain_text(f"decided by {ana} (api)")
    expect(rows.nth(1)).to_contain_text("deny it")
    assert dialogs == []
    no_horizontal_scroll(page)
    page.evaluate(axe_source)
    found = page.evaluate("async () => (await axe.run(document)).violations")
    serious = [f"{v['id']}: {v['help']}" for v in found if v["impact"] in ("serious", "critical")]
    assert serious == []

    page.get_by_label("Outcome").select_option("denied")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_have_attribute("data-outcome", "denied")
    expect(page.get_by_label("Outcome")).to_have_value("denied")  # the form keeps it
    page.get_by_role("link", name="Clear").click()
    expect(rows).to_have_count(3)
    rows.nth(0).get_by_role("link", name=other).click()  # that agent's decisions only
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text("cargo build")
    page.get_by_role("link", name="Clear").click()
    rows.nth(1).get_by_role("link", name="its decisions").click()  # that session's
    expect(rows).to_have_count(2)
    expect(page.get_by_label("Session")).to_have_value(sid)

    page2, _ = open_as(browser, contexts, web, dan, path="/audit")
    expect(page2.get_by_text("No decisions.")).to_be_visible()
    expect(page2.locator(".audit-row")).to_have_count(0)
