"""A request's card in the thread, in a real browser (system Chromium) against a
real gateway, on a phone 390 px wide: decided from the card, which then says so;
the "Always allow" pattern is a disclosure that opens from the keyboard; nothing
overflows sideways.

No sleeps: Playwright's expectations wait on the DOM with a deadline; the agent's
stream is read until the decision frame arrives (with a deadline)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.web.conftest import Web
from tests.web.test_browser import agent_events_until, live, no_horizontal_scroll, open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)

PHONE_390 = {"width": 390, "height": 844}
LONG = "/srv/" + "very-long-directory-name-without-spaces-" * 6 + "deploy.sh"


def no_overflow(page: Page, element: Locator) -> None:
    """The element and the page fit the viewport: nothing scrolls sideways."""
    sizes = element.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert sizes[0] <= sizes[1], sizes
    no_horizontal_scroll(page)


def test_approving_from_the_card_in_the_thread_on_a_390px_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext], artifacts: Path
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot)["session_id"]
    page, dialogs = open_as(
        browser, contexts, web, ana, viewport=PHONE_390, path=f"/sessions/{sid}"
    )
    other, _ = open_as(browser, contexts, web, ana, path=f"/sessions/{sid}")  # a 2nd tab
    live(page)
    live(other)
    asked = web.ask(
        bot,
        sid,
        kind="approval",
        tool_name="Bash",
        tool_input={"command": f"bash {LONG} --really"},
        summary="deploy the shop",
    )
    card = page.get_by_role("article", name=re.compile(r"^Approval: Bash from "))
    expect(card).to_be_visible()  # arrived live, in the thread, as its card
    expect(card.locator("pre.command code")).to_contain_text("--really")
    expect(card.locator(".chip.type")).to_have_text("approval request")
    expect(page.get_by_role("link", name=f"Bash from {bot}")).to_be_visible()  # the jump link
    assert "agentmail approve" not in page.content()

    # The pattern of "Always allow": folded, with a marker, opened from the keyboard.
    summary = card.get_by_text("Change what “Always allow” covers")
    pattern = card.get_by_label("Pattern for “Always allow”")
    expect(pattern).to_be_hidden()
    marker = summary.evaluate(
        "e => { const s = getComputedStyle(e, '::before');"
        " return [s.content, parseFloat(s.borderLeftWidth)]; }"
    )
    assert marker[0] != "none" and marker[1] > 0, marker  # a visible arrow
    summary.focus()
    page.keyboard.press("Enter")
    expect(pattern).to_be_visible()
    expect(card.locator("details.pattern")).to_have_attribute("open", "")
    no_overflow(page, card)
    page.keyboard.press("Enter")  # and closes the same way
    expect(pattern).to_be_hidden()
    no_overflow(page, card)
    page.screenshot(path=str(artifacts / "thread-card-phone.png"), full_page=True)

    card.get_by_label("Note").fill("staging only")
    card.get_by_role("button", name="Approve").click()
    done = page.get_by_role("article", name=re.compile(r"^Approved: Bash from "))
    expect(done).to_be_visible()  # the card now says how it was decided
    expect(done.locator("p.state")).to_contain_text(f"Approved by {ana}")
    expect(done.locator("p.state")).to_contain_text("staging only")
    expect(done.get_by_role("button")).to_have_count(0)
    expect(card).to_have_count(0)
    expect(page.locator(".mail.compact")).to_contain_text("Approved: Bash")  # the receipt
    expect(page).to_have_title(re.compile(r"^[^(]"))  # no pending count left
    no_overflow(page, done)
    page.screenshot(path=str(artifacts / "thread-card-decided-phone.png"), full_page=True)
    # The other tab's card turned too, through the event stream: the decided card
    # has another id, so the live merge swaps it in (static/app.js mergeList).
    expect(other.get_by_role("article", name=re.compile(r"^Approved: Bash from "))).to_be_visible()
    expect(other.get_by_role("button", name="Approve")).to_have_count(0)
    decision = agent_events_until(web, bot, "permission_decision", {"request_id": asked["id"]})
    assert decision["decision"] == "approve" and decision["note"] == "staging only"
    assert dialogs == []
