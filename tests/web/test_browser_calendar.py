"""The /calendar page in a real browser (system Chromium) against a real gateway:
schedule through the form, see it listed, have it delivered, cancel another.

No sleeps: Playwright's expectations wait on the DOM with a deadline, and the
agent's stream is read until the calendar mail arrives (with a deadline)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.web.conftest import PHONE, Web
from tests.web.test_browser import agent_events_until, no_horizontal_scroll, open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)


def test_schedule_from_the_form_is_delivered_and_another_is_cancelled_on_a_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    page, dialogs = open_as(browser, contexts, web, ana, path="/calendar", viewport=PHONE)
    expect(page.get_by_text("Nothing scheduled.")).to_be_visible()
    no_horizontal_scroll(page)

    def schedule(subject: str, at: datetime, tz: str = "UTC") -> None:
        page.get_by_label("To", exact=True).fill(f"{bot}@/srv/shop")
        page.get_by_label("Subject").fill(subject)
        page.get_by_label("Body").fill("from the calendar page")
        page.get_by_label("When").fill(at.strftime("%Y-%m-%dT%H:%M:%S"))
        page.get_by_label("Time zone").fill(tz)
        page.get_by_role("button", name="Schedule").click()

    # A bad time zone comes back with the field named and the form kept.
    schedule("later", datetime.now(UTC) + timedelta(days=2), tz="Mars/Olympus")
    expect(page.get_by_role("alert")).to_contain_text("timezone")
    expect(page.get_by_label("Subject")).to_have_value("later")  # the form is kept
    expect(page.locator(".cal-entry")).to_have_count(0)
    page.get_by_label("Time zone").fill("UTC")
    page.get_by_role("button", name="Schedule").click()
    expect(page.locator(".cal-entry")).to_have_count(1)

    schedule("soon", (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0))
    expect(page.locator(".cal-entry")).to_have_count(2)

    mail = agent_events_until(web, bot, "new_mail", {"type": "calendar", "subject": "soon"})
    assert mail["from_human"] is True
    page.reload()
    expect(page.locator(".cal-entry", has_text="soon")).to_have_attribute("data-status", "done")

    later = page.locator(".cal-entry", has_text="later")
    later.get_by_role("button", name="Cancel").click()
    expect(page.locator(".cal-entry", has_text="later")).to_have_attribute(
        "data-status", "cancelled"
    )
    no_horizontal_scroll(page)
    assert dialogs == []
