"""The phone pictures of docs/web.md (and the README's "From your phone"): the
approvals page at 390 × 844 with a pending request, and the notification the
service worker showed for it. A headless browser has no notification tray, so the
second picture is drawn from what `registration.getNotifications()` returned
(title, body, actions) and says so in its caption. The push itself is real: the
gateway's, through our push service (tests/web/push_parts.py), to the worker.

Copied to docs/images/ only with AGENTMAIL_UPDATE_DOCS_SCREENSHOTS=1; always
saved in test-artifacts/web/."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.conftest import USER_PASSWORD
from tests.fakes.push_service import PushService
from tests.web.conftest import ROOT, Web
from tests.web.push_parts import anonymous_device, push_device, pushes, pushweb
from tests.web.test_browser import open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)
__all__ = ["pushes", "pushweb"]  # fixtures used by name


PHONE_SHOT = {"width": 390, "height": 844}
RENDERED_FROM = (
    "Rendered from the notification the service worker showed "
    "(title, body and actions read back with getNotifications())"
)
# A headless browser has no notification tray: the notification is drawn from
# what getNotifications() returned, with the icon it carried. Text goes in with
# textContent (never as HTML).
NOTIFICATION_CARD = """
<!doctype html><meta charset="utf-8">
<style>
  body { margin: 0; height: 844px; font: 15px/1.35 system-ui, sans-serif; color: #111;
         background: linear-gradient(160deg, #1e3a8a, #0f172a); }
  .clock { color: #fff; text-align: center; font-size: 64px; font-weight: 300; padding-top: 70px; }
  .card { margin: 40px 12px 0; background: #f8fafc; border-radius: 22px; padding: 14px 16px;
          box-shadow: 0 6px 24px rgba(0,0,0,.35); }
  .app { display: flex; align-items: center; gap: 8px; color: #475569; font-size: 13px; }
  .app img { width: 20px; height: 20px; border-radius: 5px; }
  .title { font-weight: 600; margin-top: 8px; }
  .body { margin-top: 2px; white-space: pre-wrap; font-family: ui-monospace, monospace;
          font-size: 14px; }
  .actions { display: flex; gap: 8px; margin-top: 12px; }
  .actions span { flex: 1; text-align: center; padding: 10px; border-radius: 12px;
                  background: #e2e8f0; color: #1d4ed8; font-weight: 600; }
  .note { color: #cbd5e1; font-size: 13px; margin: 18px 16px; text-align: center; }
</style>
<div class="clock">9:41</div>
<div class="card" role="img" aria-label="notification">
  <div class="app"><img alt=""><span class="origin"></span></div>
  <div class="title"></div><div class="body"></div><div class="actions"></div>
</div>
<p class="note"></p>
"""


def plain_names(web: Web) -> tuple[str, str]:
    """ "ana" and the agent "claude" for the pictures (the other tests' names carry
    a random suffix, so these are free in this module's gateway)."""
    r = web.http.post(
        "/api/v1/admin/users",
        json={"username": "ana", "password": USER_PASSWORD},
        headers=web.auth("admin"),
    )
    assert r.status_code == 201, r.text
    web.login("ana")
    team = {"name": "claude", "owners": ["ana"], "workspaces": ["/**"],
            "max_mode": {"owners": "full", "taskers": "full"}}  # fmt: skip
    r = web.http.post("/api/v1/admin/agents", json=team, headers=web.auth("admin"))
    assert r.status_code == 201, r.text
    web.tokens["claude"] = r.json()["key"]
    return "ana", "claude"


def test_phone_pictures_of_a_request_and_its_notification(
    pushweb: Web,
    pushes: PushService,
    browser: Browser,
    contexts: list[BrowserContext],
    artifacts: Path,
) -> None:
    """docs/images/phone-approval.png and phone-notification.png (copied there only
    with AGENTMAIL_UPDATE_DOCS_SCREENSHOTS=1; always in test-artifacts/web/)."""
    web = pushweb
    ana, bot = plain_names(web)
    session = web.session_with(ana, bot)
    sub = push_device(web, pushes, ana, "Ana's phone")
    phone = anonymous_device(browser, contexts, web, PHONE_SHOT)
    command = {"command": "npm test -- --watch=false", "description": "Run the tests"}
    web.ask(bot, session["session_id"], kind="approval", tool_name="Bash", tool_input=command)
    [message] = pushes.wait(1, sub.name, timeout=20)
    phone.push(message.payload)
    shown = phone.wait_notification(message.payload["tag"], message.payload["title"])
    icon = phone.page.evaluate(
        """async () => {
            const [n] = await (await navigator.serviceWorker.ready).getNotifications();
            const blob = await (await fetch(n.icon)).blob();
            return await new Promise((ok) => {
                const r = new FileReader(); r.onload = () => ok(r.result); r.readAsDataURL(blob);
            });
        }"""
    )
    card = phone.page.context.new_page()
    card.set_viewport_size(PHONE_SHOT)  # type: ignore[arg-type]
    card.set_content(NOTIFICATION_CARD)
    card.evaluate(
        """([n, icon, origin, note]) => {
            document.querySelector(".app img").src = icon;
            document.querySelector(".origin").textContent = `AgentMail · ${origin} · now`;
            document.querySelector(".title").textContent = n.title;
            document.querySelector(".body").textContent = n.body;
            for (const a of n.actions) {
                const b = document.createElement("span");
                b.textContent = a.title;
                document.querySelector(".actions").appendChild(b);
            }
            document.querySelector(".note").textContent = note;
        }""",
        [shown, icon, web.url.removeprefix("http://"), RENDERED_FROM],
    )
    expect(card.locator(".actions span")).to_have_count(len(shown["actions"]))
    card.screenshot(path=str(artifacts / "phone-notification.png"))

    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE_SHOT, path="/approvals")
    expect(page.get_by_role("article", name=re.compile(r"^Approval: Bash"))).to_be_visible()
    page.screenshot(path=str(artifacts / "phone-approval.png"))

    if os.environ.get("AGENTMAIL_UPDATE_DOCS_SCREENSHOTS") != "1":
        return  # the artifacts are enough; the docs' copies change only on request
    docs = ROOT / "docs" / "images"
    docs.mkdir(exist_ok=True)
    shutil.copy(artifacts / "phone-approval.png", docs / "phone-approval.png")
    shutil.copy(artifacts / "phone-notification.png", docs / "phone-notification.png")
