"""Every error answers the one shape `{"error": {"code", "message", ...}}` — also
the ones Starlette and Python's JSON parser used to produce (`{"detail": ...}`):
unknown routes, wrong methods, bodies that are not UTF-8, too deep or hold numbers
no database column takes, duplicate keys, NaN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.app import create_app
from tests.conftest import Api, fast_settings

pytestmark = pytest.mark.anyio

JSON = {"Content-Type": "application/json"}
LOGIN = "/api/v1/auth/login"


def shape(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"}, body  # never {"detail": ...}
    err: dict[str, Any] = body["error"]
    assert isinstance(err["code"], str) and isinstance(err["message"], str) and err["message"]
    return err


# (what, raw body, expected code, expected field)
BAD_BODIES = [
    ("invalid UTF-8", b'{"username": "\xff\xfe", "password": "x"}', "invalid_value", "body"),
    ("too deep", b'{"username": ' + b"[" * 10**5 + b"]" * 10**5 + b"}", "invalid_value", "body"),
    ("deep, under the recursion limit", b"[" * 70 + b"]" * 70, "invalid_value", "body"),
    ("5000-digit integer", b'{"username": ' + b"7" * 5000 + b"}", "invalid_value", "username"),
    ("integer past 2^63", b'{"username": 9223372036854775808}', "invalid_value", "username"),
    ("NaN", b'{"username": NaN, "password": "x"}', "invalid_value", "username"),
    ("Infinity", b'{"username": "a", "password": -Infinity}', "invalid_value", "password"),
    ("float overflow", b'{"username": 1e999, "password": "x"}', "invalid_value", "username"),
    ("duplicate key", b'{"username": "a", "password": "x", "username": "b"}', "invalid_value",
     "username"),
    ("not JSON", b'{"username": ', "invalid_type", "body"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "raw", "code", "field"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES]
)
async def test_a_bad_json_body_is_a_400_in_the_error_shape_naming_the_field(
    api: Api, what: str, raw: bytes, code: str, field: str
) -> None:
    err = shape(await api.http.post(LOGIN, content=raw, headers=JSON), 400)
    assert (err["code"], err["field"]) == (code, field), (what, err)


async def test_a_duplicate_key_deep_in_a_body_is_named_by_its_path(api: Api) -> None:
    raw = b'{"to": ["a@/x"], "subject": "s", "body": "b", "x": [{"k": 1, "k": 2}]}'
    r = await api.http.post("/api/v1/mail", content=raw, headers={**JSON, **api.auth("admin")})
    assert shape(r, 400)["field"] == "x[0].k"


async def test_json_that_is_merely_unusual_still_passes(api: Api) -> None:
    """The negative control: big-but-in-range integers, -0.0, escapes, deep-but-
    allowed nesting reach the route (here: a 400 from the body model, not ours)."""
    raw = (
        b'{"username": "a\\u00e9\\ud83d\\ude00", "password": "x", '
        b'"n": -9223372036854775808, "f": -0.0, "deep": ' + b"[" * 60 + b"]" * 60 + b"}"
    )
    err = shape(await api.http.post(LOGIN, content=raw, headers=JSON), 400)
    assert (err["code"], err["field"]) == ("unknown_field", "n")


async def test_an_unknown_route_is_a_404_in_the_error_shape(api: Api) -> None:
    for path in ("/nope", "/api/v1/nope", "/api/v1/agent/nope/deeper"):
        assert shape(await api.http.get(path), 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/api/v1/sessions/{sid}", {"GET", "PATCH"}),
        ("PUT", LOGIN, {"POST"}),
        ("POST", "/healthz", {"GET"}),
        ("GET", "/api/v1/grants/{sid}", {"DELETE"}),
        ("PATCH", "/api/v1/attachments", {"POST"}),
    ],
)
async def test_a_wrong_method_is_a_405_with_every_allowed_method(
    api: Api, method: str, path: str, allow: set[str]
) -> None:
    url = path.format(sid="0b7c2c4e-6a43-4a55-8d1a-3c3c0f5f0a11")
    r = await api.http.request(method, url, headers=api.auth("admin"))
    err = shape(r, 405)
    assert err["code"] == "method_not_allowed"
    assert {m.strip() for m in r.headers["allow"].split(",")} == allow
    assert set(err["allowed_methods"]) == allow


async def test_a_body_over_the_limit_is_a_413_in_the_error_shape(api: Api) -> None:
    err = shape(await api.http.post(LOGIN, content=b" " * (1024 * 1024 + 1), headers=JSON), 413)
    assert (err["code"], err["field"]) == ("too_large", "body")


async def test_a_crash_is_a_500_in_the_error_shape(tmp_path: Path) -> None:
    app = create_app(fast_settings(tmp_path))

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            err = shape(await http.get("/boom"), 500)
    assert err["code"] == "internal" and "a bug" not in err["message"]  # no internals leak
