"""A scripted day in the audit trail (docs/audit.md): people decide from the web
form, the API, the command line, a notification's action (the fake push
service, tests/fakes/push_service.py) and an e-mail reply (the recording relay,
tests/fakes/smtp_relay.py); a standing grant approves; a rule decides (written
as the rules write theirs, through create_request's audit); a request times
out; the terminal withdraws one; the session goes to full mode, then to plan
mode. Then the real `agentmail audit --json` (a subprocess) against the real
gateway (uvicorn on 127.0.0.1, in this test's event loop so the test may also
reach the gateway's services) lists every decision with the right actor kind,
actor, channel, device and outcome; the table form and the filters agree; an
agent key is refused."""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import update

from mailui4agents import testing
from mailui4agents.cli.auth import save_login
from mailui4agents.client.config import config_path
from mailui4agents.db.tables import PermissionRow
from mailui4agents.db.types import utcnow
from mailui4agents.services import email_inbound
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.api.test_audit_trail import open_decided
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, Api, make_settings
from tests.email.replies import reply, verify
from tests.fakes.push_service import PushService, push_service
from tests.fakes.smtp_relay import Relay, smtp_relay
from tests.live_app import live_app_here

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]
ANA = "ana@example.org"
PHONE = "Ana's phone"


@pytest.fixture
def pushsvc() -> Iterator[PushService]:
    with push_service() as svc:
        yield svc


@pytest.fixture
def relay() -> Iterator[Relay]:
    with smtp_relay() as r:
        yield r


@pytest.fixture
def settings(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    db_backend: str,
    pushsvc: PushService,
    relay: Relay,
) -> Settings:
    return make_settings(
        request,
        tmp_path,
        db_backend,
        push_endpoint_allow=(f"{pushsvc.url}/push/",),
        smtp_url=relay.url,
        mail_from="agentmail@gw.test",
        email_retry_base_s=0.05,
    )


async def agentmail(url: str, config_home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """The real `agentmail` as a subprocess (awaited: the gateway serves in this loop)."""
    done = await anyio.run_process(
        [*AGENTMAIL, *args],
        env=testing.clean_env(XDG_CONFIG_HOME=str(config_home), AGENTMAIL_URL=url, **env),
        check=False,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def email_of(relay: Relay, command: str) -> Any:
    """The request e-mail to ana that asks for `command` (waits, with a deadline)."""
    for _ in range(50):
        for got in relay.messages:
            body = got.message.get_body(("plain",))
            text = "" if body is None else str(body.get_content())
            if got.rcpt_tos == [ANA] and command in text:
                return got.message
        await relay.wait_async(len(relay.messages) + 1, 10.0)
    raise AssertionError(f"no request e-mail for {command}")


async def pushed_token(svc: PushService, rid: str) -> str:
    """The action token of the push of request `rid` to ana's phone."""
    for n in range(1, 50):
        for message in await svc.wait_async(n, "phone"):
            payload = message.payload
            if payload.get("request_id") == rid and payload.get("type") == "permission_request":
                return str(payload["action_token"])
    raise AssertionError(f"no push for {rid}")


async def test_a_scripted_day_is_in_agentmail_audit(
    settings: Settings, pushsvc: PushService, relay: Relay, tmp_path: Path
) -> None:
    async with (
        live_app_here(settings) as live,
        httpx.AsyncClient(base_url=live.url, timeout=30) as http,
    ):
        gw: Gateway = live.gateway
        api = Api(http)
        await api.login("admin", ADMIN_PASSWORD)
        await api.user("ana")
        await api.user("bob")
        await api.agent("claude", owners=["ana"])
        await verify(api, relay, "ana", ANA)
        sub = pushsvc.make_subscription("phone")
        r = await http.post(
            "/api/v1/push/subscriptions",
            json={**sub.to_json(), "device_name": PHONE},
            headers=api.auth("ana"),
        )
        assert r.status_code == 201, r.text
        r = await api.send("ana", ["claude@/srv/shop.new"], subject="ship the release")
        sid = r.json()["session_id"]
        r = await http.post(
            f"/api/v1/sessions/{sid}/deciders", json={"name": "bob"}, headers=api.auth("ana")
        )
        assert r.status_code in (200, 201), r.text

        async def ask(command: str, key: str | None = None) -> httpx.Response:
            body = {"session_id": sid, "relay_key": key or uuid.uuid4().hex,
                    "tool_name": "Bash", "tool_input": {"command": command}}  # fmt: skip
            return await http.post(
                "/api/v1/agent/permissions", json=body, headers=api.auth("claude")
            )

        async def asked(command: str, key: str | None = None) -> str:
            r = await ask(command, key)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

        ana_home = tmp_path / "xdg-ana"
        save_login(
            live.url, "ana", api.tokens["ana"], config_path({"XDG_CONFIG_HOME": str(ana_home)})
        )
        expected: dict[str, tuple[str, str, str | None, str | None, str | None]] = {}

        # The web form (ana's browser, logged in with her password).
        by_web = await asked("make web")
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as browser:
            page = await browser.get("/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf
            login = {"username": "ana", "password": USER_PASSWORD, "csrf": csrf.group(1)}
            assert (await browser.post("/login", data=login)).status_code == 303
            page = await browser.get("/approvals")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf
            r = await browser.post(
                f"/approvals/{by_web}", data={"decision": "approve", "csrf": csrf.group(1)}
            )
            assert r.status_code == 303, r.text
        expected[by_web] = ("approved", "person", "ana", "web", None)

        # The API (bob, with a note).
        by_api = await asked("make api")
        r = await http.post(
            f"/api/v1/permissions/{by_api}/decision",
            json={"decision": "deny", "note": "not before noon"},
            headers=api.auth("bob"),
        )
        assert r.status_code == 200, r.text
        expected[by_api] = ("denied", "person", "bob", "api", None)

        # The command line (ana's stored login).
        by_cli = await asked("make cli")
        code, out, err = await agentmail(live.url, ana_home, "approve", by_cli)
        assert code == 0, err
        expected[by_cli] = ("approved", "person", "ana", "cli", None)

        # A notification's action on ana's phone.
        by_push = await asked("make push")
        token = await pushed_token(pushsvc, by_push)
        r = await http.post("/api/v1/push/actions", json={"token": token, "action": "deny"})
        assert r.status_code == 200, r.text
        expected[by_push] = ("denied", "person", "ana", "push", PHONE)

        # An e-mail reply from ana's verified address.
        by_email = await asked("make email")
        original = await email_of(relay, "make email")
        got = await email_inbound.receive(gw, reply(original, "approve"), via="smtp")
        assert got.outcome == "decided", got
        expected[by_email] = ("approved", "person", "ana", "email", ANA)

        # "Always" makes a grant; the grant approves the same command next time.
        first = await asked("make test")
        r = await http.post(
            f"/api/v1/permissions/{first}/decision",
            json={"decision": "approve", "always": True},
            headers=api.auth("ana"),
        )
        grant_id = r.json()["grant_id"]
        expected[first] = ("approved", "person", "ana", "api", None)
        r = await ask("make test")
        assert r.json()["status"] == "approved", r.text
        expected[r.json()["id"]] = ("approved", "grant", grant_id, "grant", None)

        # A deny rule decides (as the rules write it: decided_by "rule:<id>").
        why = "rule r-42: never git push --force"
        rule_rid = (await open_decided(gw, sid, "rule:r-42", "denied", why)).request.id
        expected[rule_rid] = ("denied", "rule", "r-42", "rule", None)

        # Nobody decides in time: its deadline passes, a list expires it.
        late = await asked("make late")
        async with gw.write() as s:
            past = utcnow() - timedelta(seconds=1)
            await s.execute(
                update(PermissionRow).where(PermissionRow.id == late).values(expires_at=past)
            )
        assert (await http.get("/api/v1/permissions", headers=api.auth("ana"))).status_code == 200
        expected[late] = ("expired", "timeout", None, "system", None)

        # The agent's terminal answered first.
        mine = await asked("make local", key="race:00aa11bb22cc33dd:1")
        r = await http.post(
            "/api/v1/agent/permissions/withdraw",
            json={"relay_key_prefix": "race:00aa11bb22cc33dd:"},
            headers=api.auth("claude"),
        )
        assert r.json() == {"withdrawn": [mine]}, r.text
        expected[mine] = ("withdrawn", "terminal", "claude", "terminal", None)

        # Full mode allows, plan mode forbids: no request either time.
        for mode, reason in (("full", "mode_allows"), ("plan", "mode_forbids")):
            r = await http.patch(
                f"/api/v1/sessions/{sid}", json={"permission_mode": mode}, headers=api.auth("ana")
            )
            assert r.status_code == 200, r.text
            r = await ask(f"make {mode}")
            assert r.status_code == 409 and r.json()["error"]["reason"] == reason, r.text

        code, out, err = await agentmail(live.url, ana_home, "audit", "--json")
        assert code == 0, err
        items = json.loads(out)
        by_request = {i["request_id"]: i for i in items if i["request_id"]}
        for rid, (outcome, kind, actor, channel, device) in expected.items():
            item = by_request.pop(rid)
            by = item["decided_by"]
            assert (item["outcome"], by["kind"], by.get("name") or by.get("id")) == (
                outcome, kind, actor,
            ), item  # fmt: skip
            assert (by["channel"], by["device"]) == (channel, device), item
            assert item["session_id"] == sid and item["agent"] == "claude", item
        assert by_request == {}  # nothing else was decided
        modes = [i for i in items if i["request_id"] is None]
        assert [
            (i["outcome"], i["decided_by"]["kind"], i["decided_by"]["name"]) for i in modes
        ] == [
            ("mode_forbids", "mode", "plan"),
            ("mode_allows", "mode", "full"),
        ]
        assert [i["summary"] for i in modes] == ["make plan", "make full"]
        assert len(items) == len(expected) + 2
        assert [i["id"] for i in items] == sorted((i["id"] for i in items), reverse=True)

        # The table form: one line per decision, newest first.
        code, out, err = await agentmail(live.url, ana_home, "audit", "--since", "1h")
        assert code == 0, err
        lines = out.splitlines()
        assert len(lines) == len(items), out
        assert "mode_forbids" in lines[0] and "mode plan" in lines[0], lines[0]
        assert any(f"ana (push, {PHONE})" in line for line in lines), out
        assert any("rule r-42" in line for line in lines), out
        # Filters reach the gateway.
        code, out, err = await agentmail(
            live.url, ana_home, "audit", "--json", "--person", "bob", "--session", sid
        )
        assert code == 0, err
        assert [i["request_id"] for i in json.loads(out)] == [by_api]
        code, out, err = await agentmail(live.url, ana_home, "audit", "--since", "yesterday")
        assert code == 2 and "--since" in err, err
        # An agent's key is refused before anything is sent.
        code, out, err = await agentmail(
            live.url, tmp_path / "xdg-claude", "audit", AGENTMAIL_KEY=api.tokens["claude"]
        )
        assert code != 0 and "person" in err, err
