"""The installable web app in a real browser (system Chromium) against a real
gateway: the service worker at /sw.js takes control, keeps only the app shell,
the manifest's icons load, and when the gateway is down a page opened shows
the offline page, which comes back by itself when the gateway answers again
(docs/web.md, "Install on your phone").

No sleeps: Playwright's expectations wait on the page with a deadline."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from mailui4agents import __version__
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, copy_template
from tests.web.conftest import PHONE, Web
from tests.web.test_browser import open_as

pytestmark = pytest.mark.e2e
expect.set_options(timeout=10_000)

OFFLINE_TEXT = "The gateway cannot be reached — retrying…"


def controlled(page: Page) -> None:
    """Wait until the worker is active, then reload: the reloaded page is controlled."""
    page.wait_for_function("() => document.documentElement.dataset.sw === 'registered'")
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    page.reload()
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")


def cached_urls(page: Page) -> dict[str, list[str]]:
    """Every URL in every cache of this origin, by cache name."""
    out: dict[str, list[str]] = page.evaluate(
        """async () => {
            const out = {};
            for (const name of await caches.keys()) {
                const c = await caches.open(name);
                out[name] = (await c.keys()).map((r) => new URL(r.url).pathname);
            }
            return out;
        }"""
    )
    return out


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_service_worker_takes_control_and_keeps_only_the_shell(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """After a reload the page is controlled by /sw.js (scope "/"); browsing
    pages of the app with mail and requests in them adds nothing to the caches:
    only the shell is kept, under a name carrying the gateway's version."""
    ana = web.user("ana")
    bot = web.agent("bot")
    session = web.session_with(ana, bot)
    web.ask(bot, session["session_id"], kind="approval", tool_name="Bash",
            tool_input={"command": "make secret-thing"})  # fmt: skip
    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/approvals")
    controlled(page)
    scope = page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
    assert scope == f"{web.url}/"
    assert page.evaluate("navigator.serviceWorker.controller.scriptURL") == f"{web.url}/sw.js"
    for path in ("/", f"/sessions/{session['session_id']}", "/approvals", "/devices"):
        page.goto(path)
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
    page.evaluate("fetch('/api/v1/permissions', {credentials: 'same-origin'}).then(r => r.status)")

    caches = cached_urls(page)
    [name] = caches
    assert name.startswith(f"agentmail-shell-{__version__}-")
    worker = httpx.get(f"{web.url}/sw.js")
    shell = json.loads(worker.text.split("\n", 1)[0].removeprefix("const CONFIG = ")[:-1])
    assert shell["cache"] == name
    assert sorted(caches[name]) == sorted(shell["shell"])
    for path in caches[name]:  # the shell: static files, the manifest, the offline page
        assert path.startswith("/static/") or path in ("/offline", "/manifest.webmanifest"), path
    assert "secret-thing" not in httpx.get(f"{web.url}/offline").text


def test_sw_js_headers_and_the_manifest_with_its_icons(web: Web) -> None:
    r = httpx.get(f"{web.url}/sw.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert r.headers["cache-control"] == "no-cache"
    assert "service-worker-allowed" not in r.headers  # at the root, scope "/" needs none
    assert f"agentmail-shell-{__version__}-" in r.text.split("\n", 1)[0]

    r = httpx.get(f"{web.url}/manifest.webmanifest")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/manifest+json")
    manifest: dict[str, Any] = json.loads(r.text)
    assert manifest["start_url"] == "/" and manifest["scope"] == "/"
    assert manifest["display"] == "standalone"
    assert manifest["name"] and manifest["short_name"]
    assert manifest["theme_color"].startswith("#") and manifest["background_color"].startswith("#")
    sizes: dict[tuple[str, str], tuple[int, int]] = {}
    for icon in manifest["icons"]:
        got = httpx.get(f"{web.url}{icon['src']}")
        assert got.status_code == 200, icon
        assert got.headers["content-type"] == icon["type"], icon
        if icon["type"] == "image/png":
            sizes[(icon["sizes"], icon["purpose"])] = png_size(got.content)
    assert sizes == {
        ("192x192", "any"): (192, 192),
        ("512x512", "any"): (512, 512),
        ("512x512", "maskable"): (512, 512),
    }
    page = httpx.get(f"{web.url}/login").text
    assert '<link rel="manifest" href="/manifest.webmanifest">' in page
    assert 'rel="apple-touch-icon"' in page


@pytest.fixture
def own_gateway(tmp_path: Path, template_db: Path) -> Iterator[GatewayProcess]:
    """A gateway of this test alone: the test stops and restarts it."""
    env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    data_dir = tmp_path / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(data_dir=data_dir, env=env)
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()


def test_with_the_gateway_down_a_page_shows_the_offline_page_and_recovers_by_itself(
    own_gateway: GatewayProcess, browser: Browser, contexts: list[BrowserContext]
) -> None:
    ctx = browser.new_context(base_url=own_gateway.url, viewport=PHONE)  # type: ignore[arg-type]
    contexts.append(ctx)
    page = ctx.new_page()
    page.goto("/login?next=%2Fapprovals")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Approvals and questions")).to_be_visible()
    controlled(page)

    port = own_gateway.port
    own_gateway.stop()
    page.goto("/approvals")  # a navigation that cannot reach the gateway
    message = page.get_by_role("status").filter(has_text="The gateway cannot be reached")
    expect(message).to_be_visible()
    assert OFFLINE_TEXT in page.inner_text("#offline-message").split(" (attempt")[0]
    assert page.url == f"{own_gateway.url}/approvals"  # the page asked for, not an error page
    expect(page.locator("#offline-message")).to_contain_text("attempt")  # it keeps trying

    own_gateway.start(port=port)
    # No click: the page asks /healthz with back-off and reloads when it answers.
    expect(page.get_by_role("heading", name="Approvals and questions")).to_be_visible(
        timeout=30_000
    )
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_the_stream_reopens_at_once_when_the_page_is_shown_again(
    web: Web, browser: Browser, contexts: list[BrowserContext]
) -> None:
    """A phone's OS closes a sleeping page's connection; when the page is shown
    again (visibilitychange, pageshow, online) the stream is reopened at once, not
    after the browser's back-off, and the page catches up. A page that loads tells
    the gateway it is visible (POST /api/v1/me/presence, with the CSRF header)."""
    ana = web.user("ana")
    bot = web.agent("bot")
    page, _ = open_as(browser, contexts, web, ana, viewport=PHONE, path="/approvals")
    with page.expect_request(
        lambda r: r.url.endswith("/api/v1/me/presence") and r.method == "POST"
    ) as beat:
        page.reload()
    assert json.loads(beat.value.post_data or "") == {"visible": True}
    assert beat.value.headers.get("x-csrf-token")
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    page.evaluate("window.__agentmailStream.close(); window.__oldStream = window.__agentmailStream")
    session = web.session_with(ana, bot)  # an event while nothing listens
    web.ask(bot, session["session_id"], kind="approval", tool_name="Bash",
            tool_input={"command": "make while-asleep"})  # fmt: skip
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.wait_for_function("() => window.__agentmailStream !== window.__oldStream")
    assert page.evaluate("window.__agentmailStream.readyState") in (0, 1)
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    # What came while the stream was closed is on the page (it refreshed itself).
    expect(page.get_by_text("make while-asleep", exact=True)).to_be_visible()
