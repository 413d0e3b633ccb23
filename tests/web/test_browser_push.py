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
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.web.conftest import PHONE, Web
from tests.web.test_browser import open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)

DEADLINE_S = 10.0


@pytest.fixture
def contexts(browser: Browser) -> Iterator[list[BrowserContext]]:
    made: list[BrowserContext] = []
    yield made
    for c in made:
        c.close()


def until(check: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    """`check()`'s first truthy answer; AssertionError naming `what` at the deadline.
    (Used where there is no event to wait on: the browser's notification list.)"""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")


# The worker's notifications as plain data (getNotifications(), from the page).
NOTIFICATIONS_JS = """(tag) => navigator.serviceWorker.ready
    .then((r) => r.getNotifications(tag ? { tag } : {}))
    .then((ns) => ns.map((n) => ({
        title: n.title, body: n.body, tag: n.tag, data: n.data,
        requireInteraction: n.requireInteraction, renotify: n.renotify,
        actions: n.actions.map((a) => ({ action: a.action, title: a.title })),
    })))"""


class Device:
    """One browser context with the app's worker in control: push to it, read
    its notifications, click them (in the worker)."""

    def __init__(self, page: Page, origin: str) -> None:
        self.page = page
        self.origin = origin
        ctx = page.context
        ctx.grant_permissions(["notifications"], origin=origin)
        page.wait_for_function("() => document.documentElement.dataset.sw === 'registered'")
        page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        page.reload()
        page.wait_for_function("() => navigator.serviceWorker.controller !== null")
        self.cdp = ctx.new_cdp_session(page)
        registrations: list[dict[str, Any]] = []
        self.cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda e: registrations.extend(e["registrations"]),
        )
        self.cdp.send("ServiceWorker.enable")
        scope = f"{origin}/"

        def ours() -> str | None:
            for r in registrations:
                if r["scopeURL"] == scope and not r["isDeleted"]:
                    return str(r["registrationId"])
            return None

        # CDP events arrive while Playwright waits on something of this page.
        self.registration_id = until(
            lambda: ours() or page.evaluate("0"), "the worker's registration on CDP"
        )
        worker = next((w for w in ctx.service_workers if w.url == f"{origin}/sw.js"), None)
        self.worker = worker or ctx.wait_for_event("serviceworker")

    def push(self, payload: dict[str, Any]) -> None:
        """What the browser does when its push service brings a message."""
        self.cdp.send(
            "ServiceWorker.deliverPushMessage",
            {
                "origin": self.origin,
                "registrationId": self.registration_id,
                "data": json.dumps(payload),
            },
        )

    def notifications(self, tag: str | None = None) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = self.page.evaluate(NOTIFICATIONS_JS, tag)
        return got

    def wait_notification(self, tag: str, title: str | None = None) -> dict[str, Any]:
        """Wait (Playwright's own polling, with its deadline) until the worker has
        shown a notification `tag` (titled `title`)."""
        # The predicate must answer at once: each poll starts a read and answers
        # what the last finished read found.
        found = self.page.wait_for_function(
            f"""([tag, title]) => {{
                const w = window.__notes || (window.__notes = {{ busy: false, hit: null }});
                if (!w.busy) {{
                    w.busy = true;
                    ({NOTIFICATIONS_JS})(tag).then((ns) => {{
                        w.hit = ns.find((n) => title === null || n.title === title) || null;
                        w.busy = false;
                    }});
                }}
                return w.hit;
            }}""",
            arg=[tag, title],
            polling=100,
            timeout=DEADLINE_S * 1000,
        )
        self.page.evaluate("window.__notes = null")
        out: dict[str, Any] = found.json_value()
        return out

    def click(self, tag: str, action: str) -> dict[str, Any]:
        """A click on the notification's button `action` ("" = its body), run by
        the worker's own handler in the worker."""
        out: dict[str, Any] = self.worker.evaluate(
            """async ([tag, action]) => {
                const [n] = await self.registration.getNotifications({ tag });
                if (!n) return { outcome: "no notification" };
                return self.handleNotificationAction(n, action);
            }""",
            [tag, action],
        )
        return out


def request_payload(request_id: str, **extra: Any) -> dict[str, Any]:
    """A push as the gateway sends it for a new request (docs/api.md, "Push payload")."""
    return {
        "type": "permission_request",
        "request_id": request_id,
        "title": "Bash from bot",
        "body": "npm test",
        "tag": request_id,
        "actions": [{"action": "approve", "title": "Approve"}, {"action": "deny", "title": "Deny"}],
        "action_token": f"tok-{uuid.uuid4().hex}",
        "url": f"/approvals#request-{request_id}",
        **extra,
    }


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
    device.cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": web.url, "registrationId": device.registration_id, "data": "not json"},
    )
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
