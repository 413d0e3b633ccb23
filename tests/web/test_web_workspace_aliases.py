"""The admin page's workspace aliases (new work by e-mail, docs/email.md): an
admin sets, changes and removes them with the same use cases as the API
(services/workspace_aliases.py); a person who is no admin is refused, a missing
CSRF token too, and a bad alias is a 400 naming it."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN_PASSWORD, Api
from tests.web.test_web_admin_sessions import browser

pytestmark = pytest.mark.anyio


async def _aliases(api: Api) -> dict[str, str]:
    r = await api.http.get("/api/v1/admin/workspace-aliases", headers=api.auth("admin"))
    assert r.status_code == 200, r.text
    return {a["alias"]: a["workspace"] for a in r.json()["items"]}


async def test_an_admin_sets_changes_and_removes_an_alias_on_the_admin_page(api: Api) -> None:
    async with browser(api, "admin", ADMIN_PASSWORD) as boss:
        page = await boss.http.get("/admin")
        assert "No workspace aliases." in page.text
        r = await boss.post("/admin/alias", alias="shop", workspace="/srv//shop/")
        assert r.status_code == 303 and r.headers["location"] == "/admin"
        assert await _aliases(api) == {"shop": "/srv/shop"}
        page = await boss.http.get("/admin")
        assert '<li id="alias-shop"><code>shop</code> → <code>/srv/shop</code>' in page.text
        r = await boss.post("/admin/alias", alias="shop", workspace="/srv/shop2")
        assert r.status_code == 303
        assert await _aliases(api) == {"shop": "/srv/shop2"}
        r = await boss.post("/admin/alias", alias="Shop", workspace="/srv/x")
        assert r.status_code == 400 and "lower case" in r.text
        r = await boss.post("/admin/alias", alias="web", workspace="srv/web")
        assert r.status_code == 400 and "absolute" in r.text
        assert await _aliases(api) == {"shop": "/srv/shop2"}
        r = await boss.post("/admin/remove-alias", alias="shop")
        assert r.status_code == 303
        assert await _aliases(api) == {}
        r = await boss.post("/admin/remove-alias", alias="shop")
        assert r.status_code == 404


@pytest.mark.parametrize(
    ("action", "form"),
    [("alias", {"alias": "evil", "workspace": "/"}), ("remove-alias", {"alias": "keep"})],
)
async def test_alias_actions_refuse_others_and_need_csrf(
    api: Api, action: str, form: dict[str, str]
) -> None:
    r = await api.http.put(
        "/api/v1/admin/workspace-aliases/keep",
        json={"workspace": "/srv"},
        headers=api.auth("admin"),
    )
    assert r.status_code == 201, r.text
    await api.user("eve")
    async with browser(api, "eve") as eve:
        r = await eve.submit(f"/admin/{action}", form)
        assert r.status_code == 403 and "admins only" in r.text
    async with browser(api, "admin", ADMIN_PASSWORD) as boss:
        for bad in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
            r = await boss.http.post(f"/admin/{action}", data={**form, **bad})
            assert r.status_code == 403, bad
    r = await api.http.post(f"/admin/{action}", data=form)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert await _aliases(api) == {"keep": "/srv"}
