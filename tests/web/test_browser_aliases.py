"""The admin page's workspace aliases in a real browser (system Chromium), on a
phone: the form sets one, the list shows it, its button removes it; the
section scrolls no page sideways and its buttons are big enough to touch."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.web.conftest import PHONE, Web
from tests.web.test_browser import no_horizontal_scroll, open_as, touch_targets_ok

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)


def test_admin_sets_and_removes_an_alias_on_a_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    boss = web.user("aliasboss", is_admin=True)
    page, dialogs = open_as(browser, contexts, web, boss, viewport=PHONE, path="/admin")
    alias = f"shop-{int(time.time() * 1000) % 100000}"
    page.get_by_label("Alias (a-z, 0-9 and -)").fill(alias)
    page.get_by_label("Workspace (an absolute path").fill("/srv/a/rather/long/workspace/path/x")
    page.get_by_role("button", name="Set alias").click()
    item = page.locator(f"#alias-{alias}")
    expect(item).to_contain_text("/srv/a/rather/long/workspace/path/x")
    no_horizontal_scroll(page)
    touch_targets_ok(page, "#alias-" + alias)
    # The browser refuses an upper-case alias before sending it (the pattern);
    # the gateway would too (tests/web/test_web_workspace_aliases.py).
    page.get_by_label("Alias (a-z, 0-9 and -)").fill("Shop")
    page.get_by_label("Workspace (an absolute path").fill("/srv/x")
    page.get_by_role("button", name="Set alias").click()
    expect(page.locator("#alias-Shop")).to_have_count(0)
    assert page.evaluate("document.getElementById('new-alias').validity.patternMismatch")
    page.get_by_role("button", name=f"Remove alias {alias}").click()
    expect(page.locator(f"#alias-{alias}")).to_have_count(0)
    assert dialogs == []
