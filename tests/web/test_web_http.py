"""The web UI's HTTP rules in-process (fast): safe Markdown, cookies, CSRF,
login limits shared with the API, static files, redirects."""

from __future__ import annotations

import re

import httpx
import pytest

from mailui4agents.web.render import markdown, static_url
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("source", "forbidden"),
    [
        ("<script>alert(1)</script>", "<script"),
        ('<img src=x onerror="alert(1)">', "<img"),
        ("[a](javascript:alert(1))", "javascript:"),
        ("[a](JaVaScRiPt:alert(1))", "href"),
        ("[a](data:text/html,<script>alert(1)</script>)", "href"),
        ("![pixel](https://tracker.invalid/p.png)", "<img"),
        ("<svg onload=alert(1)>", "<svg"),
        ('<a href="https://x.invalid" onclick="alert(1)">x</a>', "onclick"),
        ('[x](https://ok.invalid "t" onmouseover=alert(1))', "onmouseover="),
        ("<iframe src=https://x.invalid></iframe>", "<iframe"),
    ],
)
def test_markdown_is_inert(source: str, forbidden: str) -> None:
    """No dangerous element, no handler attribute, no script link: whatever text
    remains is escaped text (`&lt;...`), never markup."""
    html = str(markdown(source))
    tags = re.findall(r"<[^>]*>", html)
    for tag in tags:
        low = tag.lower()
        assert not re.search(r"\son\w+\s*=", low), html
        assert not re.match(r"</?(script|img|svg|iframe|object|embed|style)", low), html
        assert "javascript:" not in low and "data:" not in low, html
    if forbidden.startswith("<"):
        assert forbidden not in html, html


def test_markdown_keeps_what_mail_needs() -> None:
    html = str(markdown("**bold** *it* `code`\n\n- a\n- b\n\n[site](https://example.org)"))
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>code</code>" in html and "<li>a</li>" in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer nofollow"' in html


async def _login_form(http: httpx.AsyncClient) -> str:
    r = await http.get("/login")
    assert r.status_code == 200
    m = re.search(r'name="csrf" value="([^"]+)"', r.text)
    assert m
    return m.group(1)


async def _web_login(http: httpx.AsyncClient, user: str, password: str) -> httpx.Response:
    csrf = await _login_form(http)
    return await http.post(
        "/login", data={"username": user, "password": password, "csrf": csrf, "next": "/"}
    )


def _csrf_of(html: str) -> str:
    m = re.search(r'<meta name="csrf-token" content="([^"]+)"', html)
    assert m
    return m.group(1)


async def test_cookie_is_secure_over_https(api: Api) -> None:
    transport = api.http._transport
    async with httpx.AsyncClient(transport=transport, base_url="https://gw") as https:
        r = await _web_login(https, "admin", ADMIN_PASSWORD)
    assert r.status_code == 303, r.text
    cookie = r.headers["set-cookie"]
    assert "am_web=" in cookie
    for flag in ("HttpOnly", "SameSite=lax", "Secure", "Max-Age="):
        assert flag.lower() in cookie.lower(), cookie
    r = await _web_login(api.http, "admin", ADMIN_PASSWORD)  # plain http: no Secure
    assert "secure" not in r.headers["set-cookie"].lower()


async def test_post_without_csrf_is_403(api: Api) -> None:
    r = await api.http.post("/login", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 403  # the login form has its token too
    await api.agent("bot")
    r = await _web_login(api.http, "admin", ADMIN_PASSWORD)
    assert r.status_code == 303
    page = await api.http.get("/compose")
    csrf = _csrf_of(page.text)
    form = {"to": "bot@/srv/w.new", "subject": "s", "body": "b"}
    for bad in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
        r = await api.http.post("/compose", data={**form, **bad})
        assert r.status_code == 403, bad
    for path in ("/logout", "/admin/users", "/sessions/x", "/approvals/x"):
        assert (await api.http.post(path, data={})).status_code == 403, path
    # A fetch carries it as a header instead.
    r = await api.http.post(
        "/compose", data=form, headers={"X-CSRF-Token": csrf, "Accept": "application/json"}
    )
    assert r.status_code == 200, r.text
    # And the form field works; another session's token does not.
    r = await api.http.post("/compose", data={**form, "csrf": csrf})
    assert r.status_code == 303 and r.headers["location"].startswith("/sessions/")
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as other:
        assert (await _web_login(other, "admin", ADMIN_PASSWORD)).status_code == 303
        r = await other.post("/compose", data={**form, "csrf": csrf})
        assert r.status_code == 403


async def test_web_and_api_share_the_login_limits(api: Api) -> None:
    await api.user("lim")
    for _ in range(10):  # settings.login_failures_per_user (default 10)
        r = await _web_login(api.http, "lim", "wrong")
        assert r.status_code == 401
    r = await _web_login(api.http, "lim", USER_PASSWORD)
    assert r.status_code == 429 and "too many login attempts" in r.text
    assert "retry-after" in r.headers
    r = await api.http.post(
        "/api/v1/auth/login", json={"username": "lim", "password": USER_PASSWORD}
    )
    assert r.status_code == 429  # the same limiter as the API login


async def test_logout_revokes_the_server_side_session(api: Api) -> None:
    r = await _web_login(api.http, "admin", ADMIN_PASSWORD)
    token = r.cookies["am_web"]
    page = await api.http.get("/")
    assert page.status_code == 200
    r = await api.http.post("/logout", data={"csrf": _csrf_of(page.text)})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    api.http.cookies.clear()
    api.http.cookies.set("am_web", token)
    r = await api.http.get("/")
    assert r.status_code == 303 and r.headers["location"] == "/login?next=%2F"


async def test_next_is_never_another_site(api: Api) -> None:
    csrf = await _login_form(api.http)
    for evil in ("//evil.invalid/", "https://evil.invalid/", "/\\evil.invalid"):
        r = await api.http.post(
            "/login",
            data={"username": "admin", "password": ADMIN_PASSWORD, "csrf": csrf, "next": evil},
        )
        assert r.status_code == 303 and r.headers["location"] == "/", evil
        api.http.cookies.delete("am_web")


async def test_static_files_have_cache_busting_names(api: Api) -> None:
    url = static_url("app.js")
    assert re.fullmatch(r"/static/app\.[0-9a-f]{10}\.js", url)
    r = await api.http.get(url)
    assert r.status_code == 200 and "immutable" in r.headers["cache-control"]
    assert (await api.http.get("/static/app.js")).status_code == 404
    assert (await api.http.get("/static/..%2Fviews.py")).status_code == 404
    r = await api.http.get("/manifest.webmanifest")
    assert r.json()["display"] == "standalone"


async def test_pages_send_a_strict_content_security_policy(api: Api) -> None:
    await _web_login(api.http, "admin", ADMIN_PASSWORD)
    r = await api.http.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert r.headers["cache-control"] == "no-store"


async def test_the_admin_form_gives_a_new_agent_its_roots_and_taskers(api: Api) -> None:
    """The creation form asks where the agent may work and who may set it to work
    (docs/access.md); without roots the agent list says it works nowhere."""
    api.open_agents = False
    await api.user("dora")
    assert (await _web_login(api.http, "admin", ADMIN_PASSWORD)).status_code == 303
    page = await api.http.get("/admin")
    assert 'name="workspaces"' in page.text and 'name="taskers"' in page.text
    csrf = _csrf_of(page.text)
    form = {
        "csrf": csrf,
        "name": "bot",
        "workspaces": "/srv/*\n/home/ana/src/**",
        "taskers": "dora",
    }
    r = await api.http.post("/admin/agents", data=form)
    assert r.status_code == 200, r.text
    got = await api.http.get("/api/v1/agents/bot", headers=api.auth("admin"))
    assert got.json()["workspaces"] == ["/srv/*", "/home/ana/src/**"]
    assert [(t["name"], t["role"]) for t in got.json()["taskers"]] == [
        ("admin", "owner"),
        ("dora", "tasker"),
    ]
    r = await api.http.post("/admin/agents", data={"csrf": csrf, "name": "idle"})
    assert r.status_code == 200, r.text
    listing = (await api.http.get("/admin")).text
    assert "<code>/srv/*</code>" in listing and "<strong>nowhere</strong>" in listing
