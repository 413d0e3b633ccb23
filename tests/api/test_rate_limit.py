"""The per-sender session-creation rate limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailui4agents.settings import Settings
from tests.conftest import Api, fast_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return fast_settings(tmp_path, session_rate_limit=3)


async def test_session_creation_is_rate_limited_per_sender(api: Api) -> None:
    people = api
    await api.agent("claude")
    await api.user("ana")
    for i in range(3):
        assert (
            await people.send("ana", ["claude@/srv/shop.new"], subject=f"s{i}")
        ).status_code == 201
    r = await people.send("ana", ["claude@/srv/shop.new"], subject="one too many")
    assert r.status_code == 429
    assert int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"]["code"] == "rate_limited"
    # Another sender is not affected, and mail into existing sessions still flows.
    assert (await people.send("claude", ["ana@/srv/shop.new"], subject="mine")).status_code == 201
    assert (
        await people.send("ana", ["claude@/srv/shop.claude-s0"], subject="x")
    ).status_code == 201


async def test_adopting_platform_sessions_counts_toward_the_same_limit(api: Api) -> None:
    await api.user("ana")
    await api.agent("claude", owners=["ana"])
    sessions = [
        {"platform_id": f"p{i}", "slug": f"term-{i}", "title": f"t{i}", "cwd": "/srv/shop"}
        for i in range(4)
    ]
    r = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"platform_sessions": sessions},
        headers=api.auth("claude"),
    )
    assert r.status_code == 200
    for i in range(3):
        ok = await api.send("ana", [f"claude@/srv/shop.term-{i}"], subject="adopt")
        assert ok.status_code == 201, ok.text
    r = await api.send("ana", ["claude@/srv/shop.term-3"], subject="adopt")
    assert r.status_code == 429  # adoption is no back door around the limit
