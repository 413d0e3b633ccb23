""" "Waiting for you" (docs/platforms.md, "Interactive sessions"): a real
`agentmail hook claude-code` (or `codex`) subprocess with AGENTMAIL_INTERACTIVE=1
tells a real gateway (tests/live_app.py) that the agent waits; the gateway's push
sender posts to the fake push service (tests/fakes/push_service.py), which
decrypts what the phone would show. One push per (session, kind, turn).

"Nothing was pushed" is never waited for with a sleep: a later notice that does
push is the sync point, and the phone's inbox then holds exactly what it should."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.settings import Settings
from tests.conftest import ADMIN_PASSWORD, Api, make_settings
from tests.fakes.push_service import Message, PushService, Subscription, push_service
from tests.hooks.harness import HookRun, hook_env, run_hook
from tests.live_app import LiveApp, live_app

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CC = "claude-code"


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
    phone: Subscription
    tmp: Path
    shop: Path
    platform_id: str

    def env(self, agent: str = "claude") -> dict[str, str]:
        env = hook_env(self.live.url, self.api.tokens[agent], self.tmp / "home", self.tmp / "hd")
        return {**env, "AGENTMAIL_INTERACTIVE": "1", "AGENTMAIL_OWNER": "ana"}

    def transcript(self, *texts: str) -> Path:
        """A Claude Code JSONL transcript whose assistant turns said `texts`."""
        path = self.tmp / f"{uuid.uuid4().hex}.jsonl"
        lines = [{"type": "user", "message": {"role": "user", "content": "fix the build"}}]
        for text in texts:
            content = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]
            lines.append(
                {"type": "assistant", "message": {"role": "assistant", "content": content}}
            )
            lines.append(
                {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}
            )
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    async def notification(
        self, prompt_id: str, kind: str = "idle_prompt", transcript: Path | None = None
    ) -> HookRun:
        message = {
            "idle_prompt": "Claude is waiting for your input",
            "permission_prompt": "Claude needs your permission",
        }[kind]
        payload = {
            "session_id": self.platform_id,
            "transcript_path": str(transcript or self.transcript("All done.")),
            "cwd": str(self.shop),
            "prompt_id": prompt_id,
            "hook_event_name": "Notification",
            "message": message,
            "notification_type": kind,
        }
        run = await run_hook(CC, payload, self.env(), self.shop)
        assert (run.returncode, run.stdout, run.stderr) == (0, "", ""), run
        return run

    async def session_id(self) -> str:
        """The bound mail session (binding is idempotent)."""
        r = await self.api.http.post(
            "/api/v1/agent/sessions/interactive",
            json={
                "platform_id": f"{CC}:{self.platform_id}",
                "owner": "ana",
                "cwd": str(self.shop),
            },
            headers=self.api.auth("claude"),
        )
        assert r.status_code == 200, r.text
        return str(r.json()["id"])

    async def pushes(self, n: int) -> list[Message]:
        got = await self.svc.wait_async(n, self.phone.name, 30)
        assert len(self.svc.received(self.phone.name)) == n, self.svc.received(self.phone.name)
        return got


@pytest.fixture
async def world(settings: Settings, pushsvc: PushService, tmp_path: Path) -> AsyncIterator[World]:
    for name in ("home", "hd", "shop"):
        (tmp_path / name).mkdir()
    with live_app(settings) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            api = Api(http)
            await api.login("admin", ADMIN_PASSWORD)
            await api.user("ana")
            await api.user("bob")
            await api.agent("claude", owners=["admin", "ana"])
            await api.agent("codex", owners=["admin", "ana"])
            await api.agent("other", owners=["admin", "ana"])
            phone = pushsvc.make_subscription()
            r = await http.post(
                "/api/v1/push/subscriptions",
                json={**phone.to_json(), "device_name": "Ana's phone"},
                headers=api.auth("ana"),
            )
            assert r.status_code == 201, r.text
            yield World(live, api, pushsvc, phone, tmp_path, tmp_path / "shop", uuid.uuid4().hex)


def _is_waiting(message: Message, what: str) -> dict[str, Any]:
    pushed = message.payload
    assert pushed["type"] == "waiting", pushed
    assert pushed["title"] == f"claude is waiting for {what} in shop", pushed
    return pushed


async def test_one_push_per_turn_with_the_agents_last_words(world: World) -> None:
    said = world.transcript("first try", "Built it.\nTests pass.\nShall I deploy to staging?")
    await world.notification("p1", transcript=said)
    [first] = await world.pushes(1)
    pushed = _is_waiting(first, "your input")
    assert pushed["body"] == "Built it.\nTests pass.\nShall I deploy to staging?", pushed
    assert pushed["actions"] == [] and pushed["url"].startswith("/sessions/"), pushed

    # The same turn again (Claude Code repeats idle_prompt): nothing more.
    await world.notification("p1", transcript=said)
    r = await world.api.http.post(
        f"/api/v1/agent/sessions/{await world.session_id()}/waiting",
        json={"kind": "input", "message": "again", "turn": "p1"},
        headers=world.api.auth("claude"),
    )
    assert r.status_code == 200 and r.json() == {"deduplicated": True, "pushed": 0}, r.text

    # A new turn: a new push, and the phone holds exactly two.
    await world.notification("p2", transcript=world.transcript("Deployed."))
    _, second = await world.pushes(2)
    assert _is_waiting(second, "your input")["body"] == "Deployed."


async def test_permission_notice_is_skipped_while_a_request_is_pending(world: World) -> None:
    sid = await world.session_id()
    r = await world.api.http.post(
        "/api/v1/agent/permissions",
        json={
            "session_id": sid,
            "tool_name": "Bash",
            "tool_input": {"command": "make deploy"},
            "relay_key": uuid.uuid4().hex,
        },
        headers=world.api.auth("claude"),
    )
    assert r.status_code in (200, 201), r.text
    [request] = await world.pushes(1)
    assert request.payload["type"] == "permission_request"

    await world.notification("p1", kind="permission_prompt")
    r = await world.api.http.post(
        f"/api/v1/agent/sessions/{sid}/waiting",
        json={"kind": "permission", "message": "Claude needs your permission", "turn": "p9"},
        headers=world.api.auth("claude"),
    )
    assert r.status_code == 200 and r.json()["deduplicated"] is True, r.text

    # The sync point: the idle notice of the same turn does push, and it is the
    # only one after the request's.
    await world.notification("p1", kind="idle_prompt")
    _, idle = await world.pushes(2)
    _is_waiting(idle, "your input")


async def test_permission_notice_without_a_pending_request_pushes(world: World) -> None:
    await world.notification("p1", kind="permission_prompt")
    [pushed] = await world.pushes(1)
    _is_waiting(pushed, "your permission in the terminal")


async def test_codex_stop_says_waiting_once_per_turn(world: World) -> None:
    payload = {
        "session_id": world.platform_id,
        "turn_id": "t1",
        "cwd": str(world.shop),
        "hook_event_name": "Stop",
        "last_assistant_message": "Refactored the parser.\nReady for review.",
    }
    for _ in range(2):
        run = await run_hook("codex", payload, world.env("codex"), world.shop)
        assert (run.returncode, run.stdout) == (0, ""), run
    await run_hook("codex", {**payload, "turn_id": "t2"}, world.env("codex"), world.shop)
    first, second = await world.pushes(2)
    for message in (first, second):
        assert message.payload["title"] == "codex is waiting for your input in shop"
    assert first.payload["body"] == "Refactored the parser.\nReady for review."


async def test_without_interactive_the_hook_sends_nothing(world: World) -> None:
    env = {**world.env(), "AGENTMAIL_INTERACTIVE": ""}
    payload = {
        "session_id": world.platform_id,
        "cwd": str(world.shop),
        "prompt_id": "p1",
        "hook_event_name": "Notification",
        "message": "Claude is waiting for your input",
        "notification_type": "idle_prompt",
    }
    run = await run_hook(CC, payload, env, world.shop)
    assert (run.returncode, run.stdout) == (0, ""), run
    await world.notification("p2")  # the sync point
    [only] = await world.pushes(1)
    _is_waiting(only, "your input")


async def test_only_an_agent_of_the_session_may_notify_it(world: World) -> None:
    sid = await world.session_id()
    url = f"/api/v1/agent/sessions/{sid}/waiting"
    body = {"kind": "input", "message": "waiting", "turn": "p1"}
    http = world.api.http
    assert (await http.post(url, json=body)).status_code == 401
    human = await http.post(url, json=body, headers=world.api.auth("ana"))
    assert human.status_code == 403, human.text
    other = await http.post(url, json=body, headers=world.api.auth("other"))
    assert other.status_code == 404, other.text
    unknown = await http.post(
        f"/api/v1/agent/sessions/{uuid.uuid4()}/waiting",
        json=body,
        headers=world.api.auth("claude"),
    )
    assert unknown.status_code == 404, unknown.text
    for bad, field in (
        ({**body, "kind": "lunch"}, "kind"),
        ({**body, "turn": "x" * 201}, "turn"),
        ({**body, "message": ""}, "message"),
        ({**body, "excerpt": "x" * 2001}, "excerpt"),
    ):
        r = await http.post(url, json=bad, headers=world.api.auth("claude"))
        assert r.status_code in (400, 422) and field in r.text, (field, r.text)
    # The refused calls took nothing: the agent's own first notice of p1 pushes.
    ok = await http.post(url, json=body, headers=world.api.auth("claude"))
    assert ok.status_code == 200 and ok.json() == {"deduplicated": False, "pushed": 1}, ok.text
    [pushed] = await world.pushes(1)
    _is_waiting(pushed, "your input")


@pytest.mark.slow
async def test_a_finished_turn_of_real_claude_code_in_a_terminal_pushes_once(
    world: World,
) -> None:
    """Claude Code 2.1.197 in tmux, with the idle delay at 1 s: the finished turn
    gives one "waiting for your input" push with its last words; the next turn
    gives the second, and the phone then holds exactly two (none repeated)."""
    from tests.bridge.agent_clis import require
    from tests.bridge.tmux import Terminal, claude_in_terminal
    from tests.fakes.model_server import ModelServer, answer

    claude_bin = require("@anthropic-ai/claude-code")
    env = world.env()
    wanted = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_INTERACTIVE", "AGENTMAIL_OWNER")
    terminal = Terminal(world.tmp / "tmux.sock")
    with ModelServer(answer("All done. Shall I deploy?")) as model:
        try:
            claude_in_terminal(
                terminal, claude_bin, world.shop, world.tmp / "claude-home", model.url,
                "build it", {k: env[k] for k in wanted},
                claude_json={"messageIdleNotifThresholdMs": 1000},
            )  # fmt: skip
            [first] = await world.pushes(1)
            assert _is_waiting(first, "your input")["body"] == "All done. Shall I deploy?"
            terminal.keys("and the docs", "Enter")
            _, second = await world.pushes(2)
            _is_waiting(second, "your input")
        finally:
            (world.tmp / "screen.txt").write_text(terminal.screen())
            terminal.close()
