"""Web Push in a real browser (system Chromium): the service worker (static/sw.js)
shows what the gateway pushes, and a notification's button decides a real request
on a real gateway (docs/web.md, "Notifications in the browser").

What is real and what is not: headless Chromium cannot reach a real push service
(FCM for Chromium), and that service is outside the system. So the subscription a
device gives the gateway is made by the test against our own push service
(tests/fakes/push_service.py, a real HTTP server on 127.0.0.1, allowed with
`--push-endpoint-allow`), which checks VAPID and decrypts what the gateway sent.
The test then hands that very payload to the browser's worker over CDP
(`ServiceWorker.deliverPushMessage`), as the browser's push service would. On
/devices, `PushManager.prototype.subscribe` is replaced by an init script that
returns such a subscription. Everything from the worker on is the real browser:
notifications are read back with `registration.getNotifications()`, and a click
runs the worker's own handler (`self.handleNotificationAction`) in the worker.

No sleeps: each wait is on a condition with a deadline."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.fakes.push_service import PushService, unb64url
from tests.web.conftest import PHONE, Web
from tests.web.push_parts import (
    Device,
    Hook,
    anonymous_device,
    deliveries,
    fake_subscribe,
    hooks,
    pending_request,
    push_device,
    pushes,
    pushweb,
    request_now,
    request_payload,
    until,
)
from tests.web.test_browser import open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)
# Fixtures used by name below (pytest finds them in this module's namespace).
__all__ = ["hooks", "pushes", "pushweb"]


def test_a_push_shows_a_notification_with_its_title_tag_and_buttons(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ana = web.user("ana")
    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/approvals")
    device = Device(page, web.url)
    rid = str(uuid.uuid4())
    device.push(request_payload(rid))
    n = device.wait_notification(rid)
    assert n["title"] == "Bash from bot" and n["body"] == "npm test"
    assert n["actions"] == [
        {"action": "approve", "title": "Approve"},
        {"action": "deny", "title": "Deny"},
    ]
    assert n["requireInteraction"] is True and n["renotify"] is True
    assert n["data"]["url"] == f"/approvals#request-{rid}"
    assert n["data"]["request_id"] == rid

    # A URL of another site is never opened from a notification: the approvals page instead.
    other = str(uuid.uuid4())
    device.push(request_payload(other, url="https://evil.invalid/phish"))
    assert device.wait_notification(other)["data"]["url"] == "/approvals"
    # Something that is not JSON still shows (userVisibleOnly), saying so.
    device.push("not json")
    assert "could not be read" in device.wait_notification("", "MailUI4Agents")["body"]


def test_a_decided_push_replaces_the_notification_of_the_same_request(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """The second device's notification of a request becomes "Already handled"
    when the push of type decided arrives: same tag, so one notification, no buttons."""
    ana = web.user("ana")
    phone, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/approvals")
    laptop, _ = open_as(browser, contexts, web, ana, path="/approvals")
    devices = [Device(phone, web.url), Device(laptop, web.url)]
    rid = str(uuid.uuid4())
    for d in devices:
        d.push(request_payload(rid))
        d.wait_notification(rid, "Bash from bot")
    second = devices[1]
    decided = {"type": "decided", "request_id": rid, "tag": rid, "title": "Already handled",
               "body": "Approved by ana on Phone", "actions": [], "url": "/approvals"}  # fmt: skip
    second.push(decided)
    n = second.wait_notification(rid, "Already handled")
    assert [x["title"] for x in second.notifications(rid)] == ["Already handled"]
    assert n["actions"] == [] and n["data"]["action_token"] is None
    assert n["renotify"] is False and n["requireInteraction"] is False  # replaced quietly
    assert n["body"] == "Approved by ana on Phone"
    # The first device's is untouched until its own push comes.
    assert [x["title"] for x in devices[0].notifications(rid)] == ["Bash from bot"]


def test_turning_notifications_on_and_off_on_the_devices_page(
    pushweb: Web, pushes: PushService, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """A password login names this browser as a device and subscribes it; the
    gateway's test push reaches our push service and, handed to the worker, shows;
    turning off removes the subscription at the gateway. Every state is shown."""
    web = pushweb
    ana = web.user("ana")
    sub = pushes.make_subscription()
    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/devices")
    fake_subscribe(page.context, sub)
    device = Device(page, web.url)  # notifications allowed for the site; reloaded
    box = page.locator("#push")
    state = page.locator("#push-state")
    expect(state).to_have_text("Off: this device gets no notifications.")
    turn_on = page.get_by_role("button", name="Turn on notifications")
    turn_on.click()
    expect(box).to_have_attribute("data-state", "failed")
    expect(state).to_contain_text("give this device a name first")
    page.get_by_label("Name of this device").fill("Ana's test phone")
    turn_on.click()
    expect(box).to_have_attribute("data-state", "on")
    expect(state).to_contain_text("On: this device gets a notification")
    saved = json.loads(page.evaluate("sessionStorage.getItem('test-push-subscription')"))
    key = web.http.get("/api/v1/push/vapid-public-key").json()["key"]
    assert saved["userVisibleOnly"] is True and bytes(saved["key"]) == unb64url(key)
    [mine] = web.http.get("/api/v1/devices", headers=web.auth(ana)).json()["items"]
    assert mine["name"] == "Ana's test phone" and mine["push"] is True

    page.reload()  # this browser is that device now
    expect(page.locator(f"#device-{mine['id']} .chip").first).to_have_text("this device")
    expect(box).to_have_attribute("data-state", "on")
    expect(page.get_by_label("Name of this device")).to_have_count(0)

    # The gateway's test push, through our push service, to the worker.
    tested = web.http.post("/api/v1/push/test", headers=web.auth(ana))
    assert tested.status_code == 200, tested.text
    [message] = pushes.wait(1, sub.name)
    device.push(message.payload)
    shown = device.wait_notification(message.payload.get("tag") or "", message.payload["title"])
    assert shown["body"] == message.payload["body"]

    page.get_by_role("button", name="Turn off notifications").click()
    expect(box).to_have_attribute("data-state", "off")
    [mine] = web.http.get("/api/v1/devices", headers=web.auth(ana)).json()["items"]
    assert mine["push"] is False
    assert page.evaluate("sessionStorage.getItem('test-push-subscription')") is None


def test_a_replaced_subscription_is_renewed_by_the_worker(
    pushweb: Web, pushes: PushService, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """`pushsubscriptionchange`: the worker (its own handler, run in its context,
    with the old and the new subscription as the browser gives them) tells the
    gateway, which pushes the device at the new endpoint from then on; an old
    subscription the gateway does not hold is refused, and the worker says so."""
    web = pushweb
    ana = web.user("ana")
    old = push_device(web, pushes, ana, "Ana's phone")
    new = pushes.make_subscription()
    device = anonymous_device(browser, contexts, web)
    renew = """([o, n]) => self.renewSubscription({ toJSON: () => o }, { toJSON: () => n })"""
    done = device.worker.evaluate(renew, [old.to_json(), new.to_json()])
    assert done == {"outcome": "renewed", "status": 200}
    tested = web.http.post("/api/v1/push/test", headers=web.auth(ana))
    assert [i["status_code"] for i in tested.json()["items"]] == [201]
    pushes.wait(1, new.name)
    assert pushes.received(old.name) == []
    stranger = pushes.make_subscription()
    refused = device.worker.evaluate(renew, [stranger.to_json(), new.to_json()])
    assert refused == {"outcome": "refused", "status": 404}
    assert device.worker.evaluate("self.renewSubscription(null, null)") == {
        "outcome": "no old subscription"
    }


def test_a_refused_subscription_and_blocked_notifications_are_said(
    pushweb: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    web = pushweb
    ana = web.user("ana")
    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/devices")
    # An endpoint into the private network: the gateway refuses it, naming the field.
    fake_subscribe(page.context, {"endpoint": "https://127.0.0.1:9/push/x",
                                  "keys": {"p256dh": "x", "auth": "y"}})  # fmt: skip
    Device(page, web.url)
    page.get_by_label("Name of this device").fill("Ana's laptop")
    page.get_by_role("button", name="Turn on notifications").click()
    expect(page.locator("#push")).to_have_attribute("data-state", "failed")
    expect(page.locator("#push-state")).to_contain_text("the gateway refused the subscription")
    expect(page.locator("#push-state")).to_contain_text("field:")
    assert web.http.get("/api/v1/devices", headers=web.auth(ana)).json()["items"] == []

    # Notifications refused for the site (here: never allowed in a headless browser).
    other, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/devices")
    other.context.clear_permissions()
    other.get_by_label("Name of this device").fill("Ana's tablet")
    other.get_by_role("button", name="Turn on notifications").click()
    expect(other.locator("#push")).not_to_have_attribute("data-state", "working")
    expect(other.locator("#push")).to_have_attribute("data-state", re.compile("blocked|off"))
    expect(other.locator("#push-state")).to_contain_text(re.compile("^(Blocked|Off): "))


def test_approve_on_a_notification_decides_the_real_request_and_the_hook_allows(
    pushweb: Web,
    pushes: PushService,
    browser: Browser,
    contexts: list[BrowserContext],
    hooks: list[Hook],
    tmp_path: Path,
) -> None:
    """(d) and (e): ana's phone and laptop get the push of a waiting hook's request;
    "Approve" on the phone (the worker's own handler, in the worker) decides it at
    the gateway; the hook exits allowed; the laptop's notification becomes
    "Already handled" when its decided push arrives; a second press answers 409."""
    web = pushweb
    ana = web.user("ana")
    bot = web.agent("bot")
    session = web.session_with(ana, bot)
    phone_sub = push_device(web, pushes, ana, "Ana's phone")
    laptop_sub = push_device(web, pushes, ana, "Ana's laptop")
    phone = anonymous_device(browser, contexts, web)
    laptop = anonymous_device(browser, contexts, web)

    hook = Hook(web, bot, session["session_id"], tmp_path / "hook", "npm test")
    hooks.append(hook)
    [to_phone] = pushes.wait(1, phone_sub.name, timeout=20)
    [to_laptop] = pushes.wait(1, laptop_sub.name, timeout=20)
    request = pending_request(web, ana, session["session_id"])
    sent = to_phone.payload
    assert sent["type"] == "permission_request" and sent["request_id"] == request["id"]
    assert sent["tag"] == request["id"] and sent["action_token"]
    phone.push(sent)
    laptop.push(to_laptop.payload)
    shown = phone.wait_notification(request["id"], sent["title"])
    assert shown["title"] == sent["title"] and shown["body"] == sent["body"]
    assert [a["action"] for a in shown["actions"]] == ["approve", "deny"]
    laptop.wait_notification(request["id"], to_laptop.payload["title"])

    # A tap on the laptop's notification itself: an "opened" receipt, and the
    # request's page in the app's window (here without a login: to the login form).
    tapped = laptop.click(request["id"], "")
    assert tapped["outcome"] == "opened" and tapped["window"] == "navigated", tapped
    expect(laptop.page).to_have_url(re.compile(r"/login\?next=%2Fapprovals"))
    until(
        lambda: "opened" in deliveries(web, ana, request["id"], "Ana's laptop"),
        "the laptop's opened receipt",
    )
    laptop.push(to_laptop.payload)  # shown again, for what follows
    laptop.wait_notification(request["id"], to_laptop.payload["title"])

    done = phone.click(request["id"], "approve")
    assert done["outcome"] == "decided", done
    assert done["decision"]["status"] == "approved"
    assert phone.notifications(request["id"]) == []  # closed
    verdict = hook.verdict()
    assert verdict["permissionDecision"] == "allow", verdict
    assert "ana" in verdict["permissionDecisionReason"]
    now = request_now(web, ana, session["session_id"], request["id"])
    assert now["status"] == "approved" and now["decided_by"] == ana
    assert now["decided_via"]["channel"] == "push", now
    # The worker's receipt: the phone showed it (delivery record, docs/api.md).
    until(
        lambda: "shown" in deliveries(web, ana, request["id"], "Ana's phone"),
        "the phone's shown receipt",
    )
    # The phone's token is spent: pressing again answers 401, and the worker
    # opens the request's page instead (to decide there after logging in).
    phone.push(sent)
    phone.wait_notification(request["id"], sent["title"])
    spent = phone.click(request["id"], "deny")
    assert spent["outcome"] == "opened" and spent["status"] == 401, spent
    expect(phone.page).to_have_url(re.compile(r"/login\?next=%2Fapprovals"))

    # The laptop: the decided push (same tag) replaces its notification.
    decided = [
        m for m in pushes.wait(2, laptop_sub.name, timeout=20) if m.payload["type"] == "decided"
    ]
    assert decided, [m.payload for m in pushes.received(laptop_sub.name)]
    laptop.push(decided[0].payload)
    handled = laptop.wait_notification(request["id"], "Already handled")
    assert [n["title"] for n in laptop.notifications(request["id"])] == ["Already handled"]
    assert handled["actions"] == []

    # Pressing Deny on the laptop's first notification, had it stayed: 409, who was first.
    laptop.push(to_laptop.payload)
    laptop.wait_notification(request["id"], to_laptop.payload["title"])
    late = laptop.click(request["id"], "deny")
    assert late["outcome"] == "already_decided" and late["status"] == 409, late
    again = laptop.wait_notification(request["id"], f"Already handled by {ana}")
    assert "already decided" in again["body"]
    now = request_now(web, ana, session["session_id"], request["id"])
    assert now["status"] == "approved"  # the late deny changed nothing
