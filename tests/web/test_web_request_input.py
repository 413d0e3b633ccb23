"""What the web UI shows to whom (issue 22, item 6), in-process, from the side
that must not see and from the side that may: a request's input in the thread,
a request behind `/approvals/{id}`, an agent's platform on `/contacts`."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import ADMIN_PASSWORD, Api
from tests.web.test_web_admin_sessions import browser

pytestmark = pytest.mark.anyio

SECRET = "zebrasecret"


async def _world(api: Api) -> dict[str, Any]:
    """ana owns a session with bot and cc'd carl in; eve is in none of it."""
    for name in ("ana", "carl", "eve"):
        await api.user(name)
    await api.agent("bot", owners=["ana"])
    first = (await api.send("ana", ["bot@/srv/shop.new"], subject="Clean up")).json()
    here = f"/srv/shop.{first['session_alias']}"
    r = await api.send("ana", [f"bot@{here}"], cc=[f"carl@{here}"], subject="carl too")
    assert r.status_code == 201, r.text
    return {"sid": first["session_id"]}


async def _ask(api: Api, sid: str, **body: Any) -> dict[str, Any]:
    r = await api.http.post(
        "/api/v1/agent/permissions",
        json={"session_id": sid, "relay_key": uuid.uuid4().hex, **body},
        headers=api.auth("bot"),
    )
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


async def test_the_thread_shows_a_requests_input_to_its_deciders_only(api: Api) -> None:
    w = await _world(api)
    command = f"rm -rf /srv/{SECRET}"
    await _ask(api, w["sid"], tool_name="Bash", tool_input={"command": command})
    async with browser(api, "ana") as ana:
        page = await ana.http.get(f"/sessions/{w['sid']}")
        assert page.status_code == 200 and command in page.text
    for who, password in (("carl", None), ("admin", ADMIN_PASSWORD)):
        async with browser(api, who, *([password] if password else [])) as other:
            page = await other.http.get(f"/sessions/{w['sid']}")
            assert page.status_code == 200, who
            assert "Approval needed: Bash" in page.text, who
            assert "bot asked the session's deciders to use Bash" in page.text, who
            assert SECRET not in page.text, who


async def test_approvals_answers_an_outsider_as_if_the_request_did_not_exist(api: Api) -> None:
    """It read the request's kind first: a question answered without an answer
    told anyone that the id was a question (400) before access was checked."""
    w = await _world(api)
    asked = await _ask(api, w["sid"], kind="question", question="Which database?")
    async with browser(api, "eve") as eve:
        r = await eve.post(f"/approvals/{asked['id']}", decision="answer")
        assert r.status_code == 404
        missing = await eve.post("/approvals/no-such-request", decision="answer")
        assert missing.status_code == 404
    async with browser(api, "carl") as carl:  # reads the session, decides nothing
        r = await carl.post(f"/approvals/{asked['id']}", decision="answer")
        assert r.status_code == 403
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/approvals/{asked['id']}", decision="answer")
        assert r.status_code == 400 and "an answer must not be empty" in r.text
        r = await ana.post(f"/approvals/{asked['id']}", decision="answer", answer="staging")
        assert r.status_code == 303, r.text


async def test_contacts_show_an_agents_platform_to_its_owners_and_admins_only(
    api: Api,
) -> None:
    await _world(api)
    r = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"platform": "claude-code", "version": "9.8.7", "mode_enforcement": "native"},
        headers=api.auth("bot"),
    )
    assert r.status_code == 200, r.text
    for who in ("carl", "eve"):
        async with browser(api, who) as other:
            page = await other.http.get("/contacts")
            assert page.status_code == 200 and 'id="agent-bot"' in page.text
            assert "claude-code" not in page.text and "9.8.7" not in page.text, who
            assert "last seen" not in page.text and "for its owners and admins" in page.text
    for who, password in (("ana", None), ("admin", ADMIN_PASSWORD)):
        async with browser(api, who, *([password] if password else [])) as seer:
            page = await seer.http.get("/contacts")
            assert "claude-code 9.8.7" in page.text and "last seen" in page.text, who
