"""The "Rules" page in a real browser (system Chromium) against a real gateway
(docs/rules.md): a person adds a session rule with the keyboard only, the agent's
next request is denied by it, the person switches it off; an admin switches a
built-in rule off; a non-admin has no switch for built-ins and cannot add a
global rule; no serious axe finding.

No sleeps: Playwright's expectations wait on the DOM with a deadline."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.web.conftest import PHONE, Web
from tests.web.test_browser import no_horizontal_scroll, open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)


def test_a_session_rule_added_with_the_keyboard_denies_and_is_switched_off(
    web: Web, browser: Browser, contexts: list[BrowserContext], axe_source: str
) -> None:
    ana = web.user("ana")
    bot = web.agent("bot")
    sid = web.session_with(ana, bot, mode="full")["session_id"]
    page, dialogs = open_as(browser, contexts, web, ana, path="/rules")
    expect(page.get_by_role("link", name="Rules")).to_have_attribute("aria-current", "page")
    # A person who is no admin: no "Everywhere", no switch on the built-in rules.
    expect(page.get_by_label("Everywhere")).to_have_count(0)
    expect(page.locator("#rule-builtin-rm-rf")).to_contain_text("rm -rf")
    expect(page.locator("#rule-builtin-rm-rf button")).to_have_count(0)

    # Keyboard only: focus the tool field, type, Tab through, submit with Enter.
    page.get_by_label("Tool").focus()
    page.keyboard.type("Bash")
    page.keyboard.press("Tab")
    page.keyboard.type("git push")
    page.get_by_label("Session id").focus()
    page.keyboard.type(sid)
    page.get_by_label("Reason").focus()
    page.keyboard.type("pushes go through review")
    page.keyboard.press("Enter")
    rule = page.locator("#your-rules li", has_text="git push")
    expect(rule).to_contain_text("deny")
    rule_id = rule.locator(".rule-id").inner_text()

    denied = web.ask(bot, sid, kind="approval", tool_name="Bash",
                     tool_input={"command": "git push origin main"})  # fmt: skip
    assert denied["status"] == "denied" and denied["decided_by"] == f"rule:{rule_id}"
    assert "pushes go through review" in denied["note"]

    # Switch it off with the keyboard: the agent's next push is allowed by full mode.
    rule.get_by_role("button", name=f"Switch off rule {rule_id}").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#rule-{rule_id} .chip", has_text="off")).to_have_count(1)
    r = web.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": "after-off", "kind": "approval",
              "tool_name": "Bash", "tool_input": {"command": "git push origin main"}},
        headers=web.auth(bot),
    )  # fmt: skip
    assert r.status_code == 409 and r.json()["error"]["reason"] == "mode_allows"

    # A global rule from a non-admin is refused, whatever the form was made to send.
    csrf = page.locator("input[name=csrf]").first.get_attribute("value") or ""
    form: dict[str, str | float | bool] = {
        "csrf": csrf, "effect": "deny", "tool_name": "Bash", "scope": "global",
    }  # fmt: skip
    refused = page.request.post("/rules", form=form, headers={"Accept": "application/json"})
    assert refused.status == 403, refused.text()
    # Without the CSRF token nothing is written.
    form = {"effect": "deny", "tool_name": "Bash", "scope": "session", "session_id": sid}
    assert page.request.post("/rules", form=form).status == 403
    listed = web.http.get("/api/v1/rules", headers=web.auth(ana)).json()["items"]
    assert [x["id"] for x in listed if not x["builtin"]] == [rule_id]

    page.evaluate(axe_source)
    violations = page.evaluate("async () => (await axe.run(document)).violations")
    serious = [v["id"] for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == []
    assert dialogs == []


def test_an_admin_switches_a_builtin_rule_off_and_on_on_a_phone(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    root = web.user("root", is_admin=True)
    bot = web.agent("bot")
    sid = web.session_with(root, bot, mode="full")["session_id"]
    page, _ = open_as(browser, contexts, web, root, path="/rules", viewport=PHONE)
    no_horizontal_scroll(page)
    expect(page.get_by_label("Everywhere")).to_have_count(1)
    item = page.locator("#rule-builtin-force-push")
    item.get_by_role("button", name="Switch off builtin-force-push").click()
    switched_off = page.locator("#rule-builtin-force-push .chip", has_text="off")
    expect(switched_off).to_have_count(1)
    r = web.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": "fp-off", "kind": "approval",
              "tool_name": "Bash", "tool_input": {"command": "git push -f origin main"}},
        headers=web.auth(bot),
    )  # fmt: skip
    assert r.status_code == 409 and r.json()["error"]["reason"] == "mode_allows"
    page.locator("#rule-builtin-force-push").get_by_role(
        "button", name="Switch on builtin-force-push"
    ).click()
    expect(switched_off).to_have_count(0)
    on = web.ask(bot, sid, kind="approval", tool_name="Bash",
                 tool_input={"command": "git push -f origin main"})  # fmt: skip
    assert on["decided_by"] == "rule:builtin-force-push"
