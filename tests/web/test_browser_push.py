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
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, copy_template
from tests.fakes.push_service import PushService, Subscription, push_service, unb64url
from tests.hooks.harness import claude_input
from tests.web.conftest import PHONE, ROOT, Web
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


@pytest.fixture(scope="module")
def pushes() -> Iterator[PushService]:
    with push_service() as service:
        yield service


@pytest.fixture(scope="module")
def pushweb(
    pushes: PushService, tmp_path_factory: pytest.TempPathFactory, template_db: Path
) -> Iterator[Web]:
    """A gateway of this module that may push to our push service (its http URL on
    127.0.0.1 allowed with --push-endpoint-allow, as an operator would allow one)."""
    env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    data_dir = tmp_path_factory.mktemp("pushweb") / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(
        data_dir=data_dir, env=env, extra_args=["--push-endpoint-allow", f"{pushes.url}/push/"]
    )
    gp.start()
    try:
        with httpx.Client(base_url=gp.url, timeout=30) as http:
            w = Web(gp.url, http)
            w.login("admin", ADMIN_PASSWORD)
            yield w
    finally:
        gp.stop()


# In place of the browser's push service (outside the system): subscribe() gives
# the subscription the test made at our push service; kept in sessionStorage so
# that getSubscription() still finds it after a reload, as a browser's would.
FAKE_SUBSCRIBE_JS = """(sub) => {
  const KEY = "test-push-subscription";
  const make = (saved) => ({
    endpoint: saved.endpoint,
    expirationTime: null,
    options: { userVisibleOnly: true, applicationServerKey: new Uint8Array(saved.key).buffer },
    toJSON() { return { endpoint: saved.endpoint, expirationTime: null, keys: saved.keys }; },
    async unsubscribe() { sessionStorage.removeItem(KEY); return true; },
  });
  PushManager.prototype.subscribe = async function (options) {
    const key = Array.from(new Uint8Array(options.applicationServerKey));
    const saved = { endpoint: sub.endpoint, keys: sub.keys, key,
                    userVisibleOnly: options.userVisibleOnly };
    sessionStorage.setItem(KEY, JSON.stringify(saved));
    return make(saved);
  };
  PushManager.prototype.getSubscription = async function () {
    const saved = sessionStorage.getItem(KEY);
    return saved ? make(JSON.parse(saved)) : null;
  };
}"""


def fake_subscribe(ctx: BrowserContext, sub: Subscription | dict[str, Any]) -> None:
    data = sub.to_json() if isinstance(sub, Subscription) else sub
    ctx.add_init_script(f"({FAKE_SUBSCRIBE_JS})({json.dumps(data)})")


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
        self.pushed = 0
        worker = next((w for w in ctx.service_workers if w.url == f"{origin}/sw.js"), None)
        self.worker = worker or ctx.wait_for_event("serviceworker")

    def push(self, payload: dict[str, Any] | str) -> None:
        """What the browser does when its push service brings a message; returns
        once the worker has handled it (its showNotification settled)."""
        self.pushed += 1
        self.cdp.send(
            "ServiceWorker.deliverPushMessage",
            {
                "origin": self.origin,
                "registrationId": self.registration_id,
                "data": payload if isinstance(payload, str) else json.dumps(payload),
            },
        )
        # Chromium reconciles its list of notifications with what is on screen
        # when getNotifications() is called: asked while one is still being shown,
        # it can drop that one. So the list is read only after the worker is done.
        done = self.worker.evaluate(
            """([n, ms]) => new Promise((resolve) => {
                const end = Date.now() + ms;
                const check = () => {
                    const s = self.pushState;
                    if (s.shown + s.errors.length >= n) resolve(s);
                    else if (Date.now() > end) resolve(null);
                    else setTimeout(check, 20);
                };
                check();
            })""",
            [self.pushed, DEADLINE_S * 1000],
        )
        assert done is not None, f"the worker handled fewer than {self.pushed} pushes"
        assert not done["errors"], done["errors"]

    def notifications(self, tag: str | None = None) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = self.page.evaluate(NOTIFICATIONS_JS, tag)
        return got

    def wait_notification(self, tag: str, title: str | None = None) -> dict[str, Any]:
        """Wait (Playwright's own polling, with its deadline) until the worker has
        shown a notification `tag` (titled `title`)."""
        # The predicate must answer at once: each poll starts a read and answers
        # what the last finished read found.
        try:
            found = self._wait_for(tag, title)
        except Exception as exc:
            raise AssertionError(
                f"no notification {tag!r} titled {title!r} within {DEADLINE_S} s; "
                f"shown: {self.notifications()}; read error: "
                f"{self.page.evaluate('window.__notes && window.__notes.error')}; "
                f"the worker: {self.worker.evaluate('self.pushState')}"
            ) from exc
        self.page.evaluate("window.__notes = null")
        out: dict[str, Any] = found.json_value()
        return out

    def _wait_for(self, tag: str, title: str | None) -> Any:
        return self.page.wait_for_function(
            f"""([tag, title]) => {{
                const w = window.__notes || (window.__notes = {{ busy: false, hit: null }});
                if (!w.busy) {{
                    w.busy = true;
                    ({NOTIFICATIONS_JS})(tag).then((ns) => {{
                        w.hit = ns.find((n) => title === null || n.title === title) || null;
                        w.busy = false;
                    }}, (e) => {{ w.error = String(e); w.busy = false; }});
                }}
                return w.hit;
            }}""",
            arg=[tag, title],
            polling=100,
            timeout=DEADLINE_S * 1000,
        )

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


# --- the whole way: gateway -> push service -> worker -> the gateway's decision ---


def push_device(web: Web, pushes: PushService, person: str, name: str) -> Subscription:
    """A device of `person` subscribed at our push service (the person's API token
    with a device name: the subscription makes the device)."""
    sub = pushes.make_subscription()
    r = web.http.post(
        "/api/v1/push/subscriptions",
        json={**sub.to_json(), "device_name": name},
        headers=web.auth(person),
    )
    assert r.status_code == 201, r.text
    return sub


def anonymous_device(
    browser: Browser, contexts: list[BrowserContext], web: Web, viewport: dict[str, int] = PHONE
) -> Device:
    """A browser with the app's worker and no login: a notification's buttons need
    none (the action token is the credential), and no page of the person is shown,
    which would hold pushes back (docs/web.md, "Presence")."""
    ctx = browser.new_context(base_url=web.url, viewport=viewport)  # type: ignore[arg-type]
    contexts.append(ctx)
    page = ctx.new_page()
    page.goto("/login")
    return Device(page, web.url)


class Hook:
    """A real `agentmail hook claude-code` process waiting for its decision."""

    def __init__(self, web: Web, agent: str, session_id: str, home: Path, command: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = clean_env(
            AGENTMAIL_URL=web.url,
            AGENTMAIL_KEY=web.tokens[agent],
            AGENTMAIL_SESSION_ID=session_id,
            AGENTMAIL_DATA_DIR=str(home / "data"),
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mailui4agents.cli.main", "hook", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=home,
        )
        self.stdin = json.dumps(claude_input(tool_input={"command": command}))
        assert self.proc.stdin is not None
        self.proc.stdin.write(self.stdin)
        self.proc.stdin.close()

    def verdict(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait for the hook to finish (its output is a few lines: the pipes
        cannot fill up meanwhile)."""
        self.proc.wait(timeout)
        out, err = self._output()
        assert self.proc.returncode == 0, err
        inner: dict[str, Any] = json.loads(out)["hookSpecificOutput"]
        return inner

    def _output(self) -> tuple[str, str]:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        with self.proc.stdout, self.proc.stderr:
            return self.proc.stdout.read(), self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.returncode is None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self._output()


@pytest.fixture
def hooks() -> Iterator[list[Hook]]:
    made: list[Hook] = []
    yield made
    for h in made:
        h.stop()


def requests_of(web: Web, person: str, session_id: str) -> list[dict[str, Any]]:
    r = web.http.get(
        "/api/v1/permissions",
        params={"session_id": session_id},
        headers=web.auth(person),
    )
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def pending_request(web: Web, person: str, session_id: str) -> dict[str, Any]:
    """The request the hook made, once the gateway pushed it (the caller waited)."""
    [request] = [p for p in requests_of(web, person, session_id) if p["status"] == "pending"]
    return request


def deliveries(web: Web, person: str, request_id: str, device: str) -> list[str]:
    r = web.http.get(f"/api/v1/permissions/{request_id}/deliveries", headers=web.auth(person))
    assert r.status_code == 200, r.text
    return [d["state"] for d in r.json() if d.get("device") == device]


def request_now(web: Web, person: str, session_id: str, request_id: str) -> dict[str, Any]:
    [request] = [p for p in requests_of(web, person, session_id) if p["id"] == request_id]
    return request


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


# --- the README's "From your phone" pictures ------------------------------------

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
