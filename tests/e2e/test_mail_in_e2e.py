"""Mail into a running interactive session (hooks/mail_in.py): real `agentmail hook
claude-code` subprocesses for Stop and UserPromptSubmit against a real gateway;
a person's mail reaches the agent exactly once, whichever hook comes first."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.e2e.test_waiting_e2e import CC, World, pushsvc, settings, world
from tests.hooks.harness import HookRun, run_hook

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

__all__ = ["pushsvc", "settings", "world"]  # fixtures, imported for these tests


def event(w: World, name: str, **extra: object) -> dict[str, object]:
    return {"session_id": w.platform_id, "cwd": str(w.shop), "hook_event_name": name,
            "prompt_id": "p1", **extra}  # fmt: skip


async def mail_to_session(w: World, body: str) -> str:
    sid = await w.session_id()
    r = await w.api.http.get(
        "/api/v1/mailbox", params={"status": "all", "session_id": sid}, headers=w.api.auth("ana")
    )
    [first, *_] = r.json()["items"]
    r = await w.api.http.post(
        "/api/v1/mail",
        json={"to": [f"claude@{w.shop}"], "subject": "more", "body": body,
              "parent_mail_id": first["id"]},
        headers=w.api.auth("ana"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_a_stop_and_a_prompt_racing_deliver_the_mail_once(world: World) -> None:
    await mail_to_session(world, "please also bump the version")
    runs: list[HookRun] = []

    async def one(payload: dict[str, object]) -> None:
        runs.append(await run_hook(CC, payload, world.env(), world.shop))

    async with anyio.create_task_group() as tasks:
        for _ in range(2):
            tasks.start_soon(one, event(world, "Stop", stop_hook_active=False))
            tasks.start_soon(one, event(world, "UserPromptSubmit", prompt="go on"))
    delivered = [r for r in runs if "please also bump the version" in r.stdout]
    assert len(delivered) == 1, [r.stdout for r in runs]
    assert all(r.returncode == 0 for r in runs) and [r.stdout for r in runs].count("") == 3
    out = json.loads(delivered[0].stdout)
    assert out.get("decision") == "block" or "additionalContext" in out["hookSpecificOutput"]
    # Nothing left for the next stop.
    again = await run_hook(CC, event(world, "Stop", stop_hook_active=True), world.env(), world.shop)
    assert again.stdout == ""


async def test_nothing_outside_an_interactive_install_or_from_the_agent_itself(
    world: World,
) -> None:
    await mail_to_session(world, "a task")
    env = {k: v for k, v in world.env().items() if k != "AGENTMAIL_INTERACTIVE"}
    quiet = await run_hook(CC, event(world, "Stop"), env, world.shop)
    assert quiet.stdout == ""  # not an interactive install: nothing taken
    got = await run_hook(CC, event(world, "Stop"), world.env(), world.shop)
    assert "a task" in json.loads(got.stdout)["reason"]
