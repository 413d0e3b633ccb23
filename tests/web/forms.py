"""A person's browser on the web form, for the in-process web tests: logged in
through /login like a person, and the CSRF token a page carries."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from tests.conftest import USER_PASSWORD, Api


@asynccontextmanager
async def browser(api: Api, user: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser of `user`, logged in on the web form."""
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as http:
        page = await http.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        r = await http.post(
            "/login",
            data={"username": user, "password": USER_PASSWORD, "csrf": csrf.group(1), "next": "/"},
        )
        assert r.status_code == 303, r.text
        yield http


def csrf_of(html: str) -> str:
    m = re.search(r'<meta name="csrf-token" content="([^"]+)"', html)
    assert m
    return m.group(1)
