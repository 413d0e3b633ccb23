"""The web pages and the API run the same use cases (services/): archiving a
session cancels what is pending in one place, with the same resulting session
and events whichever side asked; a decision from a paired phone's web session
records the device, as a push action does; who is online is one rule
(services/online.py). In-process (fast)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from mailui4agents.db.tables import EventRow
from mailui4agents.services import online
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api
from tests.web.test_web_admin_sessions import browser
from tests.web.test_web_devices import pairing, use

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src" / "mailui4agents"


def _gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


async def _session_with_a_request(api: Api, subject: str) -> tuple[str, str]:
    """A session of ana with bot, and a pending request of bot in it."""
    sent = await api.send("ana", ["bot@/srv/shop.new"], subject=subject)
    assert sent.status_code == 201, sent.text
    sid = sent.json()["session_id"]
    asked = await api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": sid,
            "relay_key": uuid.uuid4().hex,
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        },
        headers=api.auth("bot"),
    )
    assert asked.status_code == 201, asked.text
    return sid, asked.json()["id"]


async def _head(api: Api) -> int:
    async with _gateway(api).read() as s:
        return int(await s.scalar(select(func.coalesce(func.max(EventRow.id), 0))) or 0)


# What may differ between two sessions: their ids, names, subjects and times.
_VARYING = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"
    r"|\d{4}-\d\d-\d\dT[\d:.]+(Z|\+00:00)?|(web|api)[- ]side"
)


def _same_shape(value: Any) -> Any:
    """`value` with what varies between two sessions blanked out."""
    if isinstance(value, dict):
        return {k: _same_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_shape(v) for v in value]
    if isinstance(value, str):
        return _VARYING.sub("…", value)
    return value


async def _events_after(api: Api, after: int) -> list[tuple[str, str, Any]]:
    async with _gateway(api).read() as s:
        rows = await s.scalars(select(EventRow).where(EventRow.id > after).order_by(EventRow.id))
        return [(r.principal, r.type, _same_shape(r.data)) for r in rows]


async def test_archiving_from_the_web_and_from_the_api_cancel_and_announce_alike(
    api: Api,
) -> None:
    await api.user("ana")
    await api.agent("bot", owners=["ana"])
    web_sid, web_req = await _session_with_a_request(api, "web side")
    api_sid, api_req = await _session_with_a_request(api, "api side")

    async with browser(api, "ana") as ana:
        before = await _head(api)
        r = await ana.http.post(
            f"/sessions/{web_sid}",
            data={"action": "archive", "csrf": ana.csrf},
            headers={"Accept": "application/json"},
        )
        assert r.status_code == 200, r.text
        web_answer = r.json()
        web_events = await _events_after(api, before)

    before = await _head(api)
    r = await api.http.patch(
        f"/api/v1/sessions/{api_sid}", json={"archived": True}, headers=api.auth("ana")
    )
    assert r.status_code == 200, r.text
    api_answer = r.json()
    api_events = await _events_after(api, before)

    # The same session as the answer, cancelled requests, and the same events.
    assert web_answer["status"] == api_answer["status"] == "archived"
    assert web_answer["pending_permissions"] == api_answer["pending_permissions"] == 0
    assert _same_shape(web_answer) == _same_shape(api_answer)
    for request_id in (web_req, api_req):
        got = await api.http.get(f"/api/v1/agent/permissions/{request_id}", headers=api.auth("bot"))
        assert (got.json()["status"], got.json()["decided_by"]) == ("cancelled", "ana")
    types = [(p, t) for p, t, _ in web_events]
    assert ("agent:bot", "permission_decision") in types and ("user:ana", "session_update") in types
    assert web_events == api_events


def test_the_archive_cascade_is_written_in_one_place() -> None:
    """Cancelling what is pending on archive: services/sessions.update_session only."""
    callers = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "cancel_pending(" in path.read_text(encoding="utf-8").replace("def cancel_pending(", "")
    )
    assert callers == ["services/sessions.py"]


async def _decided_via(api: Api, request_id: str) -> Any:
    got = await api.http.get(f"/api/v1/agent/permissions/{request_id}", headers=api.auth("bot"))
    assert got.json()["status"] == "approved", got.text
    return got.json()["decided_via"]


async def test_a_decision_from_a_paired_phone_names_the_device_and_a_password_login_none(
    api: Api,
) -> None:
    await api.user("ana")
    await api.agent("bot", owners=["ana"])
    _, by_phone = await _session_with_a_request(api, "phone")
    _, by_password = await _session_with_a_request(api, "password")

    made = await pairing(api, "ana", name="Ana's phone")
    async with httpx.AsyncClient(transport=api.http._transport, base_url="http://gw") as phone:
        assert (await use(phone, made["url"])).status_code == 303
        page = await phone.get("/approvals")
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
        assert csrf, page.text
        r = await phone.post(
            f"/approvals/{by_phone}", data={"decision": "approve", "csrf": csrf.group(1)}
        )
        assert r.status_code == 303, r.text
    assert await _decided_via(api, by_phone) == {"channel": "web", "device": "Ana's phone"}

    async with browser(api, "ana") as desk:
        r = await desk.post(f"/approvals/{by_password}", decision="approve")
        assert r.status_code == 303, r.text
    via = await _decided_via(api, by_password)
    assert via["channel"] == "web" and via.get("device") is None, via


def test_an_agent_is_online_with_a_stream_or_a_heartbeat_in_the_last_two_minutes() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert online.agent_online(1, None, now)
    assert online.agent_online(0, now - timedelta(seconds=119), now)
    assert not online.agent_online(0, now - timedelta(seconds=120), now)
    assert not online.agent_online(0, None, now)


def _agent_line(page: str, name: str) -> str:
    m = re.search(rf'<li id="agent-{name}">.*?</li>', page, re.S)
    assert m, page
    return m.group(0)


async def test_the_contacts_and_admin_pages_say_why_the_sandbox_is_unavailable(
    api: Api,
) -> None:
    """docs/sandbox.md, "Fallback": the bridge's reason reaches owners and admins
    (escaped, bounded), not other people; a malformed report is ignored."""
    await api.user("ana")
    await api.user("eve")
    await api.agent("bot", owners=["ana"])
    why = "sandbox unavailable: bwrap not installed (Debian package bubblewrap)"
    r = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"mode_enforcement": "advisory", "sandbox": {"state": "unavailable", "reason": why}},
        headers=api.auth("bot"),
    )
    assert r.status_code == 200 and r.json()["unknown_fields"] == [], r.text
    async with browser(api, "ana") as b:
        assert why in _agent_line((await b.http.get("/contacts")).text, "bot")
    async with browser(api, "admin", ADMIN_PASSWORD) as b:
        assert why in (await b.http.get("/admin")).text
    async with browser(api, "eve") as eve:
        assert "bwrap" not in _agent_line((await eve.http.get("/contacts")).text, "bot")
    await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"sandbox": {"state": "proven", "reason": None}},
        headers=api.auth("bot"),
    )
    async with browser(api, "ana") as b:
        assert "sandbox proven" in _agent_line((await b.http.get("/contacts")).text, "bot")
    await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"sandbox": {"state": "<b>odd</b>", "reason": "<script>x</script>"}},
        headers=api.auth("bot"),
    )
    async with browser(api, "ana") as b:
        line = _agent_line((await b.http.get("/contacts")).text, "bot")
    assert "sandbox" not in line and "<script>" not in line


async def test_the_contacts_page_shows_an_agents_details_to_its_owners_and_admins_only(
    api: Api,
) -> None:
    await api.user("ana")
    await api.user("eve")
    await api.agent("bot", owners=["ana"])
    r = await api.http.post(
        "/api/v1/agent/heartbeat",
        json={"platform": "claude-code", "version": "2.1", "mode_enforcement": "native"},
        headers=api.auth("bot"),
    )
    assert r.status_code == 200, r.text
    for who, password in (("ana", USER_PASSWORD), ("admin", ADMIN_PASSWORD)):
        async with browser(api, who, password) as b:
            line = _agent_line((await b.http.get("/contacts")).text, "bot")
        assert "claude-code 2.1" in line and ">online<" in line, (who, line)
    async with browser(api, "eve") as eve:
        line = _agent_line((await eve.http.get("/contacts")).text, "bot")
    assert "claude-code" not in line and "online" not in line, line
    assert "for its owners and admins" in line and "native" in line
