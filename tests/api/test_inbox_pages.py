"""Inbox and mailbox pages: keyset pagination on the recipient row's mail_seq
(services/reading.inbox, migration 0008) keeps each list's order and gives every
mail exactly once across pages, for all and for unread mail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def _pages(api: Api, path: str, who: str, **params: Any) -> list[str]:
    subjects: list[str] = []
    cursor = None
    for _ in range(20):
        query = {"limit": 3, **params, **({"cursor": cursor} if cursor else {})}
        r = await api.http.get(path, params=query, headers=api.auth(who))
        assert r.status_code == 200, r.text
        subjects += [item["subject"] for item in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return subjects
    raise AssertionError("more pages than mails")


async def test_pages_keep_the_order_and_give_every_mail_once(api: Api) -> None:
    await api.user("ana")
    await api.user("bob")  # mail to bob interleaves with ana's: other rows in the index
    await api.agent("claude")
    first = await api.send("ana", ["claude@/srv/shop.new"], subject="m0")
    assert first.status_code == 201, first.text
    parent = first.json()["id"]
    for i in range(1, 8):
        r = await api.send("ana", ["claude@/srv/shop"], subject=f"m{i}", parent_mail_id=parent)
        assert r.status_code == 201, r.text
        r = await api.send("claude", ["ana@/srv/shop", "bob@/srv/shop"], subject=f"a{i}",
                           parent_mail_id=parent)  # fmt: skip
        assert r.status_code == 201, r.text
    sent = [f"m{i}" for i in range(8)]
    answers = [f"a{i}" for i in range(1, 8)]
    # The agent's inbox: oldest first; a person's mailbox: newest first.
    assert await _pages(api, "/api/v1/agent/inbox", "claude") == sent
    assert await _pages(api, "/api/v1/mailbox", "ana") == answers[::-1]
    # Unread only: after reading two, the others, in the same order.
    r = await api.http.get("/api/v1/mailbox", params={"limit": 2}, headers=api.auth("bob"))
    for item in r.json()["items"]:
        got = await api.http.get(f"/api/v1/mail/{item['id']}", headers=api.auth("bob"))
        assert got.status_code == 200, got.text
    unread = await _pages(api, "/api/v1/mailbox", "bob", status="unread")
    assert unread == answers[::-1][2:]
