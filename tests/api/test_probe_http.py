"""HTTP-level findings of the attack probe (issue 22, item 6): the OpenAPI
document names its bearer schemes and each operation's; OPTIONS answers the
path's own methods; a multipart body cut before its closing boundary is a 400
(it was stored truncated, 201); /api/v1/docs carries a strict
Content-Security-Policy that still allows what the page loads (api/docs_page.py)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_the_openapi_document_names_the_bearer_schemes_and_each_operations(
    api: Api,
) -> None:
    spec = (await api.http.get("/api/v1/openapi.json")).json()
    schemes = spec["components"]["securitySchemes"]
    assert {k: (v["type"], v["scheme"]) for k, v in schemes.items()} == {
        "agentKey": ("http", "bearer"),
        "userToken": ("http", "bearer"),
    }
    seen = set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            want: list[dict[str, list[str]]] = (
                []
                if path in ("/api/v1/auth/login", "/healthz", "/readyz")
                else [{"agentKey" if path.startswith("/api/v1/agent/") else "userToken": []}]
            )
            assert op["security"] == want, (method, path)
            seen.add(str(want))
    assert len(seen) == 3


async def test_an_operation_documented_for_a_token_answers_401_without_one(api: Api) -> None:
    """The other side: `security` tells the truth (one route of each kind)."""
    for path in ("/api/v1/mailbox", "/api/v1/agent/inbox"):
        r = await api.http.get(path)
        assert r.status_code == 401, r.text


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/api/v1/sessions/some-id", "GET, PATCH, OPTIONS"),
        ("/api/v1/mailbox", "GET, OPTIONS"),
        ("/api/v1/mail", "POST, OPTIONS"),
        ("/api/v1/calendar/some-id", "GET, PATCH, OPTIONS"),
    ],
)
async def test_options_answers_only_the_paths_own_methods(api: Api, path: str, allow: str) -> None:
    r = await api.http.options(path)
    assert (r.status_code, r.headers["allow"], r.content) == (204, allow, b"")
    # Another method the path does not serve is still a 405 with the same Allow.
    r = await api.http.put(path, json={})
    assert r.status_code == 405 and r.headers["allow"] + ", OPTIONS" == allow


async def test_options_on_an_unknown_path_is_a_404(api: Api) -> None:
    r = await api.http.options("/api/v1/nothing-here")
    assert r.status_code == 404, r.text


def _multipart(closing: bool) -> bytes:
    part = (
        b'--XX\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nhello"
    )
    return part + (b"\r\n--XX--\r\n" if closing else b"")


@pytest.mark.parametrize("who", ["ana", "claude"])
async def test_a_multipart_body_without_its_closing_boundary_is_a_400(api: Api, who: str) -> None:
    if who == "ana":
        await api.user("ana")
        path = "/api/v1/attachments"
    else:
        await api.agent("claude")
        path = "/api/v1/agent/attachments"
    headers = {**api.auth(who), "Content-Type": "multipart/form-data; boundary=XX"}
    r = await api.http.post(path, content=_multipart(False), headers=headers)
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["field"]) == ("invalid_value", "file")
    r = await api.http.post(path, content=_multipart(True), headers=headers)  # whole: kept
    assert r.status_code == 201, r.text
    assert r.json()["size"] == 5


async def test_the_docs_page_has_a_strict_policy_that_allows_what_it_loads(api: Api) -> None:
    r = await api.http.get("/api/v1/docs")
    assert r.status_code == 200
    policy = {
        name: value
        for name, _, value in (
            d.partition(" ") for d in r.headers["content-security-policy"].split("; ")
        )
    }
    assert policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'" and policy["form-action"] == "'none'"
    assert "unsafe" not in r.headers["content-security-policy"]
    html = r.text
    # Every script and stylesheet the page names comes from an origin the policy allows.
    for src in re.findall(r'<script src="([^"]+)"', html):
        assert any(src.startswith(o) for o in policy["script-src"].split()), src
    for href in re.findall(r'rel="stylesheet" href="([^"]+)"', html):
        assert any(href.startswith(o) for o in policy["style-src"].split()), href
    # The inline script that starts it is allowed by its hash, and only it.
    inline = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in policy["script-src"].split()
    # It fetches the OpenAPI document from this origin.
    assert "'/api/v1/openapi.json'" in html and policy["connect-src"] == "'self'"
