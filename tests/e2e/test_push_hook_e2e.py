"""A notification's action answers a real waiting hook (docs/remote.md, "Approving
from a notification"): a real `agentmail hook claude-code` subprocess waits on a
real gateway (uvicorn on 127.0.0.1 in a thread, tests/live_app.py), whose push
sender posts over HTTP to the push service of tests/fakes/push_service.py; the
test plays the phone: it reads the decrypted payload and posts its action. The
command line then says who was first (`agentmail approve`, `permissions --show`)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.settings import Settings
from mailui4agents.testing import clean_env
from tests.conftest import ADMIN_PASSWORD, Api, make_settings
from tests.fakes.push_service import PushService, Subscription, push_service
from tests.hooks.harness import HookRun, claude_input, hook_env, spawn
from tests.hooks.test_claude_code import verdict
from tests.live_app import LiveApp, live_app

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CC = "claude-code"
AGENTMAIL = [sys.executable, "-m", "mailui4agents.cli.main"]


@pytest.fixture(scope="module")
def pushsvc() -> Iterator[PushService]:
    with push_service() as svc:
        yield svc


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, tmp_path: Path, db_backend: str, pushsvc: PushService
) -> Settings:
    return make_settings(
        request, tmp_path, db_backend, push_endpoint_allow=(f"{pushsvc.url}/push/",)
    )


@dataclass
class World:
    live: LiveApp
    api: Api
    svc: PushService
    sid: str
    phone: Subscription
    laptop: Subscription
    tmp: Path

    def hook_env(self) -> dict[str, str]:
        env = hook_env(self.live.url, self.api.tokens["claude"], self.tmp / "home", self.tmp / "hd")
        return {**env, "AGENTMAIL_SESSION_ID": self.sid}

    async def cli(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        env = clean_env(
            AGENTMAIL_URL=self.live.url,
            AGENTMAIL_TOKEN=self.api.tokens["ana"],
            XDG_CONFIG_HOME=str(self.tmp / "xdg"),
            HOME=str(self.tmp / "home"),
        )
        with anyio.fail_after(60):
            return await anyio.run_process(
                [*AGENTMAIL, *args], env=env, check=False, stdin=subprocess.DEVNULL
            )

    async def act(self, token: str, action: str, **extra: Any) -> httpx.Response:
        return await self.api.http.post(
            "/api/v1/push/actions", json={"token": token, "action": action, **extra}
        )


@pytest.fixture
async def world(settings: Settings, pushsvc: PushService, tmp_path: Path) -> AsyncIterator[World]:
    (tmp_path / "home").mkdir()
    (tmp_path / "hd").mkdir()
    with live_app(settings) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            await api.user("ana")
            await api.agent("claude", owners=["admin", "ana"])
            r = await api.send("ana", ["claude@/srv/shop.new"], subject=uuid.uuid4().hex)
            assert r.status_code == 201, r.text
            sid = str(r.json()["session_id"])
            subs = []
            for name in ("Ana's phone", "Ana's laptop"):
                sub = pushsvc.make_subscription()
                r = await http.post(
                    "/api/v1/push/subscriptions",
                    json={**sub.to_json(), "device_name": name},
                    headers=api.auth("ana"),
                )
                assert r.status_code == 201, r.text
                subs.append(sub)
            phone, laptop = subs
            yield World(live, api, pushsvc, sid, phone, laptop, tmp_path)


async def _hook_decided_by(world: World, action: str, **extra: Any) -> tuple[HookRun, str]:
    """Run a hook, approve or deny it from the phone's notification; the hook's run
    and the request id."""
    payload = claude_input(tool_input={"command": "make deploy", "description": "Deploy"})
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, CC, payload, world.hook_env(), world.tmp)
        [message] = await world.svc.wait_async(1, world.phone.name, 30)
        pushed = message.payload
        assert pushed["type"] == "permission_request" and "Bash" in pushed["title"], pushed
        r = await world.act(pushed["action_token"], action, **extra)
        assert r.status_code == 200, r.text
        run = await hook.result()
    return run, str(pushed["request_id"])


async def test_approve_from_a_notification_lets_the_waiting_hook_run(world: World) -> None:
    run, request_id = await _hook_decided_by(world, "approve")
    assert verdict(run) == ("allow", "approved by ana from Ana's phone")
    # The laptop's notification is replaced: same tag, "Already handled".
    _, handled = await world.svc.wait_async(2, world.laptop.name)
    assert handled.payload["tag"] == request_id and handled.payload["title"] == "Already handled"
    assert handled.payload["body"] == "Approved by ana from Ana's phone"
    # Deciding later from the command line: refused, saying who was first.
    late = await world.cli("approve", request_id)
    assert late.returncode == 1, late.stdout
    said = late.stderr.decode()
    assert f"request {request_id} already decided by ana from Ana's phone, " in said
    # What happened to it, one line per delivery.
    shown = await world.cli("permissions", "--show", request_id)
    assert shown.returncode == 0, shown.stderr.decode()
    lines = shown.stdout.decode().splitlines()
    assert lines[0].startswith(request_id), lines
    assert any(
        line.strip().startswith("push · Ana's phone · sent 201 in ") and " ms · " in line
        for line in lines
    ), lines
    shown_lines = [line.strip() for line in lines]
    assert any(line.startswith("push · Ana's phone · decided approved · ") for line in shown_lines)
    replaced = "push · Ana's laptop · decided Already handled: approved by ana from Ana's phone · "
    assert any(line.startswith(replaced) for line in shown_lines), lines


async def test_deny_from_a_notification_denies_the_hook_with_the_note(world: World) -> None:
    run, _ = await _hook_decided_by(world, "deny", note="not before the release")
    decision, reason = verdict(run)
    assert decision == "deny" and reason == "denied by ana from Ana's phone: not before the release"
