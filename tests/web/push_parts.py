"""The parts of the browser push tests (tests/web/test_browser_push.py,
tests/web/test_phone_pictures.py): a gateway that may push to our push service,
a browser context with the app's worker in control (`Device`: push to it over
CDP, read its notifications with getNotifications(), click them in the worker),
a fake PushManager.subscribe, and a real `agentmail hook claude-code` process.

Headless Chromium cannot reach a real push service (that service is outside the
system): a device's subscription is made at our own push service
(tests/fakes/push_service.py), and what the gateway sent there is handed to the
browser's worker with CDP's `ServiceWorker.deliverPushMessage`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, copy_template
from tests.fakes.push_service import PushService, Subscription, push_service
from tests.hooks.harness import claude_input
from tests.web.conftest import PHONE, Web

DEADLINE_S = 10.0


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
    """A push as the gateway sends it for a new request
    (docs/remote.md, "Approving from a notification")."""
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
    which would hold pushes back (docs/web.md, "Live")."""
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
