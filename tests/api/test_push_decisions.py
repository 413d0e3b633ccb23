"""Deciding from a notification (docs/remote.md, "Approving from a notification",
"First answer wins", "Tracking a request"): what a request pushes, decrypted by
a push service of our own (tests/fakes/push_service.py: it verifies VAPID and
decrypts like a browser), what an action token may do, who may read a request's
deliveries. An in-process gateway on a real SQLite file (or PostgreSQL); its
push sender posts over real HTTP to the fake push service on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from mailui4agents.db.audit_tables import AuditRow
from mailui4agents.db.reach_tables import DeviceRow, PushOutboxRow, PushSubscriptionRow
from mailui4agents.db.tables import PermissionRow, UserTokenRow
from mailui4agents.db.types import utcnow
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import ADMIN_PASSWORD, Api, make_settings, started_app
from tests.fakes.push_service import PushService, Subscription, push_service
from tests.web.test_web_admin_sessions import browser

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
AWS = "AKIAIOSFODNN7EXAMPLE"
BAD_TOKENS = 8  # failed logins (bad tokens) an address may have per window here


@pytest.fixture(scope="module")
def pushsvc() -> Iterator[PushService]:
    with push_service() as svc:
        yield svc


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, pushsvc: PushService
) -> Settings:
    return make_settings(
        request,
        tmp_path,
        db_backend,
        push_endpoint_allow=(f"{pushsvc.url}/push/",),
        push_retry_base_s=0.01,
        login_failures_per_address=BAD_TOKENS,
    )


@dataclass
class Device:
    sub: Subscription
    device_id: str
    name: str


@dataclass
class World:
    api: Api
    app: FastAPI
    svc: PushService
    sid: str
    devices: dict[str, Device] = field(default_factory=dict)

    @property
    def gw(self) -> Gateway:
        gw: Gateway = self.app.state.gateway
        return gw

    async def subscribe(self, person: str, name: str) -> Device:
        """A browser-like subscription for a new device of `person` (API token + name)."""
        sub = self.svc.make_subscription()
        r = await self.api.http.post(
            "/api/v1/push/subscriptions",
            json={**sub.to_json(), "device_name": name},
            headers=self.api.auth(person),
        )
        assert r.status_code == 201, r.text
        device = Device(sub, r.json()["device_id"], name)
        self.devices[name] = device
        return device

    async def ask(self, **body: Any) -> dict[str, Any]:
        body = {"session_id": self.sid, "relay_key": uuid.uuid4().hex, **body}
        if body.get("kind", "approval") == "approval":
            body.setdefault("tool_name", "Bash")
            body.setdefault("tool_input", {"command": "make deploy"})
        r = await self.api.http.post(
            "/api/v1/agent/permissions", json=body, headers=self.api.auth("bot")
        )
        assert r.status_code == 201, r.text
        return dict(r.json())

    async def pushed(self, device: Device, n: int = 1) -> list[dict[str, Any]]:
        """The first `n` payloads `device` received, decrypted (waits, with a deadline)."""
        got = await self.svc.wait_async(n, device.sub.name)
        return [m.payload for m in got[:n]]

    async def act(self, token: str, action: str, **extra: Any) -> httpx.Response:
        return await self.api.http.post(
            "/api/v1/push/actions", json={"token": token, "action": action, **extra}
        )

    async def settle(self, request_id: str) -> None:
        """Wait until every push of the request is final (sent, failed or removed)."""
        async with self.gw.read() as s:
            ids = list(
                await s.scalars(
                    select(PushOutboxRow.id).where(PushOutboxRow.request_id == request_id)
                )
            )
        assert self.gw.push is not None
        await self.gw.push.wait_final(ids, 10.0)

    async def deliveries(self, request_id: str, who: str = "ana") -> httpx.Response:
        return await self.api.http.get(
            f"/api/v1/permissions/{request_id}/deliveries", headers=self.api.auth(who)
        )


@pytest.fixture
async def world(settings: Settings, pushsvc: PushService) -> AsyncIterator[World]:
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            for name in ("ana", "bob", "carl", "dan"):
                await api.user(name)
            await api.user("root", is_admin=True)
            await api.agent("bot")
            to, cc = ["bot@/srv/shop.new"], ["carl@/srv/shop"]  # carl reads, never decides
            r = await api.send("ana", to, cc=cc, subject="deploy")
            assert r.status_code == 201, r.text
            sid = r.json()["session_id"]
            r = await http.post(
                f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
            )
            assert r.status_code in (200, 201), r.text
            yield World(api, app, pushsvc, sid)


# -- what a request pushes -------------------------------------------------------------------


async def test_an_approval_pushes_a_masked_preview_with_approve_and_deny(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    command = f"curl -H 'Authorization: Bearer {SECRET}' https://api.example.com/deploy"
    asked = await world.ask(tool_input={"command": command, "api_key": AWS, "env": "prod"})
    [payload] = await world.pushed(phone)
    assert payload["type"] == "permission_request"
    assert payload["request_id"] == asked["id"] and payload["tag"] == asked["id"]
    assert payload["actions"] == [
        {"action": "approve", "title": "Approve"},
        {"action": "deny", "title": "Deny"},
    ]
    assert payload["url"] == f"/approvals#req-{asked['id']}"
    assert "bot" in payload["title"] and "Bash" in payload["title"], payload
    assert asked["session_alias"] in payload["title"], payload
    assert payload["body"].startswith("curl -H"), payload
    assert len(payload["body"]) <= 120 and len(payload["title"]) <= 120
    assert isinstance(payload["action_token"], str) and len(payload["action_token"]) >= 22
    text = json.dumps(payload)
    assert SECRET not in text and AWS not in text, text
    assert "***" in payload["body"], payload  # masked where the key was


async def test_questions_offer_at_most_two_options_as_actions(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    two = await world.ask(
        kind="question", question="Ship it today?", options=[{"label": "yes"}, {"label": "no"}]
    )
    three = await world.ask(
        kind="question",
        question="Which region?",
        options=[{"label": "eu"}, {"label": "us"}, {"label": "ap"}],
    )
    first, second = await world.pushed(phone, 2)
    by_id = {first["request_id"]: first, second["request_id"]: second}
    assert by_id[two["id"]]["actions"] == [
        {"action": "yes", "title": "yes"},
        {"action": "no", "title": "no"},
    ]
    assert by_id[two["id"]]["body"] == "Ship it today?"
    assert by_id[three["id"]]["actions"] == []  # tapping opens the request instead
    assert by_id[three["id"]]["url"] == f"/approvals#req-{three['id']}"
    # An option of the question decides it, even one that had no button…
    r = await world.act(by_id[three["id"]]["action_token"], "us")
    assert r.status_code == 200, r.text
    assert r.json()["answers"] == ["us"]
    # …a label that is not one of its options is refused, naming `action`.
    r = await world.act(by_id[two["id"]]["action_token"], "maybe")
    assert r.status_code == 400 and r.json()["error"]["field"] == "action", r.text
    assert "yes" in r.json()["error"]["message"], r.text


async def test_push_content_none_names_nothing_and_offers_no_actions(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    r = await world.api.http.put(
        "/api/v1/me/notify-policy", json={"push_content": "none"}, headers=world.api.auth("ana")
    )
    assert r.status_code == 200, r.text
    bobs = await world.subscribe("bob", "Bob's phone")  # bob keeps the default: previews
    await world.ask(tool_input={"command": f"deploy --token {SECRET}"})
    [payload] = await world.pushed(phone)
    assert payload["title"] == "An approval is waiting", payload
    assert payload["actions"] == []
    text = json.dumps({k: v for k, v in payload.items() if k != "action_token"})
    for word in ("bot", "Bash", "deploy", world.sid, SECRET):
        assert word not in text, (word, text)
    # Negative control: the other decider's default policy shows the preview.
    [preview] = await world.pushed(bobs)
    assert "Bash" in preview["title"] and "deploy" in preview["body"], preview


# -- deciding from a notification ------------------------------------------------------------


async def test_an_action_decides_and_every_device_gets_already_handled(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    laptop = await world.subscribe("ana", "Ana's laptop")
    bobs = await world.subscribe("bob", "Bob's phone")
    asked = await world.ask()
    [on_phone] = await world.pushed(phone)
    r = await world.act(on_phone["action_token"], "approve", note="ship it")
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "approved" and out["decided_by"] == "ana" and out["note"] == "ship it"
    assert out["decided_via"] == {"channel": "push", "device": "Ana's phone"}
    for device in (laptop, bobs, phone):
        first, handled = await world.pushed(device, 2)
        assert handled["type"] == "decided" and handled["tag"] == first["tag"] == asked["id"]
        assert handled["title"] == "Already handled"
        assert handled["body"] == "Approved by ana from Ana's phone", handled
        assert handled["actions"] == [] and "action_token" not in handled
    # The other devices' tokens died with the request: 409 says who was first.
    [on_laptop, _] = await world.pushed(laptop, 2)
    r = await world.act(on_laptop["action_token"], "deny")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["reason"] == "already_decided" and err["decided_by"] == "ana"
    assert err["channel"] == "push" and err["device"] == "Ana's phone" and err["decided_at"]
    assert err["message"].startswith("request already decided by ana from Ana's phone, ")
    # What happened, in order, for the decider.
    await world.settle(asked["id"])
    r = await world.deliveries(asked["id"])
    assert r.status_code == 200, r.text
    rows = r.json()
    states = [(d["device"], d["state"]) for d in rows if d["channel"] == "push"]
    for name in ("Ana's phone", "Ana's laptop", "Bob's phone"):
        mine = [state for device, state in states if device == name]
        assert mine[:1] == ["queued"] and "sent" in mine and "decided" in mine, (name, states)
    sent = next(d for d in rows if d["state"] == "sent")
    assert sent["detail"] == "201" and sent["latency_ms"] is not None, sent
    # The settlement, from the request itself, in its place: after the first
    # pushes were sent, before the notifications it withdrew.
    [settled] = [d for d in rows if d["detail"] == "approved: ship it"]
    assert (settled["channel"], settled["device"], settled["state"]) == (
        "push",
        "Ana's phone",
        "decided",
    )
    assert settled["person"] == "ana"
    place = rows.index(settled)
    assert all(d["state"] in ("queued", "sent") for d in rows[:place]), rows
    assert {d["detail"] for d in rows[place + 1 :] if d["state"] == "decided"} == {
        "Already handled: approved by ana from Ana's phone"
    }, rows
    assert [d["at"] for d in rows] == sorted(d["at"] for d in rows), rows


async def test_deny_with_a_note_and_a_used_token_is_401(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    await world.ask()
    [payload] = await world.pushed(phone)
    r = await world.act(payload["action_token"], "deny", note="not on a Friday")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "denied" and r.json()["note"] == "not on a Friday"
    again = await world.act(payload["action_token"], "approve")
    assert again.status_code == 401, again.text
    assert "used" in again.json()["error"]["message"]


async def test_two_posts_racing_with_one_token_one_wins(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    await world.ask()
    [payload] = await world.pushed(phone)
    token = payload["action_token"]
    answers = await asyncio.gather(world.act(token, "approve"), world.act(token, "deny"))
    assert sorted(a.status_code for a in answers) == [200, 401], [a.text for a in answers]


async def test_a_token_decides_only_its_own_request(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    first = await world.ask(tool_input={"command": "make one"})
    second = await world.ask(tool_input={"command": "make two"})
    payloads = {p["request_id"]: p for p in await world.pushed(phone, 2)}
    # The body names no request: another request's id is an unknown field.
    r = await world.api.http.post(
        "/api/v1/push/actions",
        json={
            "token": payloads[first["id"]]["action_token"],
            "action": "approve",
            "request_id": second["id"],
        },
    )
    assert r.status_code == 400, r.text
    r = await world.act(payloads[first["id"]]["action_token"], "approve")
    assert r.status_code == 200 and r.json()["id"] == first["id"], r.text
    pending = await world.api.http.get(
        "/api/v1/permissions", params={"status": "pending"}, headers=world.api.auth("ana")
    )
    assert [p["id"] for p in pending.json()["items"]] == [second["id"]]


async def test_an_unknown_or_forged_token_is_401(world: World) -> None:
    for token in ("x", "A" * 43, "A" * 100):
        r = await world.act(token, "approve")
        assert r.status_code == 401, (token, r.text)
    r = await world.act("A" * 101, "approve")  # over the size limit: refused by shape
    assert r.status_code == 400 and r.json()["error"]["field"] == "token", r.text


async def test_bad_tokens_count_as_failed_logins_good_ones_never(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    await world.ask()
    [payload] = await world.pushed(phone)
    receipt = {"token": payload["action_token"], "state": "shown"}
    for _ in range(3 * BAD_TOKENS):  # good tokens use up nothing
        r = await world.api.http.post("/api/v1/push/receipts", json=receipt)
        assert r.status_code == 200, r.text
    for _ in range(BAD_TOKENS):
        assert (await world.act("B" * 43, "approve")).status_code == 401
    over = await world.act("B" * 43, "approve")
    assert over.status_code == 429 and int(over.headers["Retry-After"]) >= 1, over.text
    # Over the limit the address is refused whatever it brings, a good token too.
    r = await world.act(payload["action_token"], "approve")
    assert r.status_code == 429, r.text


async def test_a_revoked_devices_token_is_401_at_once(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    laptop = await world.subscribe("ana", "Ana's laptop")
    await world.ask()
    [on_phone] = await world.pushed(phone)
    [on_laptop] = await world.pushed(laptop)
    r = await world.api.http.delete(
        f"/api/v1/devices/{phone.device_id}", headers=world.api.auth("ana")
    )
    assert r.status_code == 200, r.text
    r = await world.act(on_phone["action_token"], "approve")
    assert r.status_code == 401, r.text
    assert "revoked" in r.json()["error"]["message"]
    # A device whose login ended (expired or revoked), its row still there: 401 too.
    async with world.gw.write() as s:
        token_id = await s.scalar(
            select(DeviceRow.token_id).where(DeviceRow.id == laptop.device_id)
        )
        await s.execute(
            update(UserTokenRow).where(UserTokenRow.id == token_id).values(expires_at=utcnow())
        )
    r = await world.act(on_laptop["action_token"], "approve")
    assert r.status_code == 401, r.text
    async with world.gw.write() as s:
        await s.execute(
            update(UserTokenRow).where(UserTokenRow.id == token_id).values(expires_at=None)
        )
    # Negative control: the device still paired decides.
    r = await world.act(on_laptop["action_token"], "approve")
    assert r.status_code == 200, r.text


# -- first answer wins -----------------------------------------------------------------------


async def test_a_late_decision_says_who_decided_from_where(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    http, api = world.api.http, world.api

    async def decide(request_id: str, who: str, **headers: str) -> httpx.Response:
        return await http.post(
            f"/api/v1/permissions/{request_id}/decision",
            json={"decision": "approve"},
            headers={**api.auth(who), **headers},
        )

    # The API first; then a notification's action, the API and the CLI are late.
    by_api = await world.ask(tool_input={"command": "make a"})
    assert (await decide(by_api["id"], "bob")).json()["decided_via"] == {"channel": "api"}
    [payload] = await world.pushed(phone)
    for late in (
        await world.act(payload["action_token"], "approve"),
        await decide(by_api["id"], "ana"),
        await decide(by_api["id"], "ana", **{"X-Agentmail-Channel": "cli"}),
    ):
        assert late.status_code == 409, late.text
        err = late.json()["error"]
        assert err["reason"] == "already_decided", err
        assert (err["decided_by"], err["channel"]) == ("bob", "api"), err
        assert err["message"].startswith("request already decided by bob through the API, ")
        assert err["message"].endswith(" s ago: approved"), err
    # The CLI's header names the command line; the web form the web.
    by_cli = await world.ask(tool_input={"command": "make b"})
    r = await decide(by_cli["id"], "ana", **{"X-Agentmail-Channel": "cli"})
    assert r.json()["decided_via"] == {"channel": "cli"}, r.text
    late = await decide(by_cli["id"], "bob")
    assert "by ana from the command line" in late.json()["error"]["message"], late.text
    by_web = await world.ask(tool_input={"command": "make c"})
    async with browser(api, "ana") as ana:
        r = await ana.post(f"/approvals/{by_web['id']}", decision="approve")
        assert r.status_code == 303, r.text
        page = await ana.post(f"/approvals/{by_web['id']}", decision="deny", note="late")
        assert "already decided by ana from the web" in page.text, page.text
    late = await decide(by_web["id"], "bob")
    assert late.json()["error"]["channel"] == "web", late.text
    # Anything else in the header is the API's.
    other = await world.ask(tool_input={"command": "make d"})
    r = await decide(other["id"], "ana", **{"X-Agentmail-Channel": "push"})
    assert r.json()["decided_via"] == {"channel": "api"}, r.text


async def test_expiry_withdraws_the_notification_and_says_timed_out(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    asked = await world.ask()
    [payload] = await world.pushed(phone)
    async with world.gw.write() as s:
        await s.execute(
            update(PermissionRow).where(PermissionRow.id == asked["id"]).values(expires_at=utcnow())
        )
    r = await world.api.http.get("/api/v1/permissions", headers=world.api.auth("ana"))
    assert r.status_code == 200  # listing expires what is due
    _, withdrawn = await world.pushed(phone, 2)
    assert withdrawn["type"] == "withdrawn" and withdrawn["tag"] == asked["id"]
    assert withdrawn["title"] == "Already handled" and withdrawn["body"] == "Timed out"
    r = await world.act(payload["action_token"], "approve")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["channel"] == "system" and err["message"].startswith(
        "request already expired: timed out "
    )
    rows = (await world.deliveries(asked["id"])).json()
    [settled] = [d for d in rows if d["channel"] == "system"]
    assert settled["state"] == "withdrawn" and settled["detail"] == "timed out", rows
    [replaced] = [d for d in rows if d["channel"] == "push" and d["state"] == "withdrawn"]
    assert replaced["detail"] == "Already handled: timed out", rows


# -- receipts and tracking -------------------------------------------------------------------


async def test_receipts_are_recorded_once_per_state(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    asked = await world.ask()
    [payload] = await world.pushed(phone)
    token = payload["action_token"]
    post = world.api.http.post
    for state, first in (("shown", True), ("shown", False), ("opened", True)):
        r = await post("/api/v1/push/receipts", json={"token": token, "state": state})
        assert r.status_code == 200 and r.json() == {"state": state, "recorded": first}, r.text
    r = await post("/api/v1/push/receipts", json={"token": token, "state": "clicked"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "state", r.text
    r = await post("/api/v1/push/receipts", json={"token": "A" * 43, "state": "shown"})
    assert r.status_code == 401, r.text
    # A used token still reports (the "Already handled" notification shows too).
    assert (await world.act(token, "approve")).status_code == 200
    r = await post("/api/v1/push/receipts", json={"token": token, "state": "shown"})
    assert r.status_code == 200 and r.json()["recorded"] is False, r.text
    rows = (await world.deliveries(asked["id"])).json()
    assert [d["state"] for d in rows].count("shown") == 1
    assert [d["state"] for d in rows].count("opened") == 1


async def test_deliveries_are_for_the_sessions_deciders_only(world: World) -> None:
    await world.subscribe("ana", "Ana's phone")
    asked = await world.ask()
    path = f"/api/v1/permissions/{asked['id']}/deliveries"
    http, api = world.api.http, world.api
    assert (await http.get(path)).status_code == 401  # anonymous
    assert (await http.get(path, headers=api.auth("bot"))).status_code == 403  # an agent
    assert (await http.get(path, headers=api.auth("dan"))).status_code == 404  # not in it
    assert (await http.get(path, headers=api.auth("carl"))).status_code == 403  # cc'd reader
    assert (await http.get(path, headers=api.auth("root"))).status_code == 403  # admin
    for decider in ("ana", "bob"):
        r = await http.get(path, headers=api.auth(decider))
        assert r.status_code == 200 and r.json()[0]["state"] == "queued", r.text
    unknown = await http.get("/api/v1/permissions/nope/deliveries", headers=api.auth("ana"))
    assert unknown.status_code == 404


async def test_a_410_shows_as_failed_and_removes_the_subscription(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    world.svc.answer(phone.sub.name, 410, "gone")
    asked = await world.ask()
    await world.settle(asked["id"])
    rows = (await world.deliveries(asked["id"])).json()
    failed = [d for d in rows if d["state"] == "failed"]
    assert failed and failed[0]["device"] == "Ana's phone" and "410" in failed[0]["detail"], rows
    async with world.gw.read() as s:
        left = await s.scalar(
            select(PushSubscriptionRow.id).where(PushSubscriptionRow.device_id == phone.device_id)
        )
    assert left is None
    # Nothing is pushed to it any more: the next request queues nothing.
    again = await world.ask()
    assert (await world.deliveries(again["id"])).json() == []


async def test_a_500_shows_on_the_request(world: World) -> None:
    phone = await world.subscribe("ana", "Ana's phone")
    world.svc.answer(phone.sub.name, 500, "push service broke")
    asked = await world.ask()
    await world.settle(asked["id"])
    rows = (await world.deliveries(asked["id"])).json()
    [failed] = [d for d in rows if d["state"] == "failed"]
    assert "500" in failed["detail"] and failed["device"] == "Ana's phone", failed


async def test_an_action_is_in_the_audit_trail_with_its_device(world: World) -> None:
    """A notification's action decides as the pushed person, channel `push`, the
    device's name: so the audit trail records it (services/audit.py)."""
    phone = await world.subscribe("ana", "Ana's phone")
    asked = await world.ask()
    [payload] = await world.pushed(phone)
    r = await world.act(payload["action_token"], "deny", note="not on a Friday")
    assert r.status_code == 200, r.text
    async with world.gw.read() as s:
        [row] = (await s.scalars(select(AuditRow))).all()
    assert (row.request_id, row.outcome, row.actor_kind, row.actor) == (
        asked["id"], "denied", "person", "ana",
    )  # fmt: skip
    assert (row.channel, row.device, row.reason) == ("push", "Ana's phone", "not on a Friday")
