"""The "Audit" page over HTTP (in-process, real SQLite file or PostgreSQL): a
login is needed; a cc'd reader sees the rows without the input; an admin sees
every session's; a bad filter is the error page naming it; the page changes
nothing (no form posts anywhere but the filter's GET)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.api.test_audit_read import build_day
from tests.conftest import Api, snapshot
from tests.web.forms import browser

pytestmark = pytest.mark.anyio


@snapshot
async def day(api: Api) -> dict[str, Any]:
    return await build_day(api)


def rows(html: str) -> list[str]:
    return re.findall(r'data-outcome="([a-z_]+)"', html)


async def test_the_page_needs_a_login(api: Api, day: dict[str, Any]) -> None:
    r = await api.http.get("/audit")
    assert r.status_code == 303 and r.headers["location"].startswith("/login"), r.text


async def test_each_reader_sees_the_rows_the_api_gives_them(
    api: Api,
    day: dict[str, Any],
) -> None:
    async with browser(api, "ana") as ana:
        page = (await ana.get("/audit")).text
        assert rows(page) == ["mode_allows", "denied", "approved"]
        assert "rm -rf /" in page and 'action="/audit"' in page
        assert 'method="post"' not in page.split("<main", 1)[1]  # only the logout form is one
        denied = (await ana.get("/audit", params={"outcome": "denied"})).text
        assert rows(denied) == ["denied"]
        assert '<option value="denied" selected>' in denied
        r = await ana.get("/audit", params={"outcome": "maybe"})
        assert r.status_code == 400 and "outcome" in r.text
    async with browser(api, "carl") as carl:
        page = (await carl.get("/audit")).text
        assert rows(page) == ["mode_allows", "denied", "approved"]
        assert "rm -rf /" not in page and "make test" not in page  # no input for a non-decider
    async with browser(api, "dan") as dan:
        page = (await dan.get("/audit")).text
        assert rows(page) == [] and "No decisions." in page
    async with browser(api, "root") as root:
        page = (await root.get("/audit", params={"person": "bob"})).text
        assert rows(page) == ["approved"]
        assert len(rows((await root.get("/audit")).text)) == 4
