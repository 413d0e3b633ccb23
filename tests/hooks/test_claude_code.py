"""`agentmail hook claude-code` end to end: real hook processes fed Claude Code's
PreToolUse JSON, a real gateway, and a scripted human deciding over HTTP."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.hooks.conftest import World
from tests.hooks.harness import HookRun, Human, claude_input, run_many, spawn

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CC = "claude-code"


def verdict(run: HookRun) -> tuple[str, str]:
    """(permissionDecision, permissionDecisionReason), after checking the exact shape."""
    assert run.returncode == 0, run.stderr
    out = run.json
    assert list(out) == ["hookSpecificOutput"]
    inner = out["hookSpecificOutput"]
    keys = {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    if "additionalContext" in inner:  # an approval's note, for the model
        assert inner["permissionDecision"] == "allow"
        assert inner["additionalContext"] == inner["permissionDecisionReason"]
        keys.add("additionalContext")
    assert set(inner) == keys
    assert inner["hookEventName"] == "PreToolUse"
    return inner["permissionDecision"], inner["permissionDecisionReason"]


async def ask_and_decide(
    world: World, human: Human, session: str, payload: dict[str, Any], decision: str, **extra: Any
) -> tuple[HookRun, dict[str, Any]]:
    """Run a hook for `payload`, wait for its request, decide it; return both."""
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, CC, payload, world.env(AGENTMAIL_SESSION_ID=session), world.workdir)
        [request] = await human.wait_pending(session)
        await human.decide(request["id"], decision, **extra)
        run = await hook.result()
    return run, request


async def test_an_approval_allows_and_the_request_shows_the_tool_call(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    payload = claude_input(tool_input={"command": "npm test", "description": "Run tests"})
    run, request = await ask_and_decide(world, human, session, payload, "approve", note="go")
    assert verdict(run) == ("allow", "approved by ana through the API: go")
    assert (
        run.json["hookSpecificOutput"]["additionalContext"] == "approved by ana through the API: go"
    )
    assert request["tool_name"] == "Bash" and request["tool_input"]["command"] == "npm test"
    assert request["relay_key"].startswith(f"hook:{CC}:{payload['session_id']}:")
    [mail] = [m for m in await human.mails(session) if m["type"] == "permission_request"]
    assert mail["id"] == request["mail_id"]


async def test_a_denial_denies_with_the_humans_note(world: World, human: Human) -> None:
    session = await human.new_session()
    note = "not on main, use a branch"
    run, _ = await ask_and_decide(world, human, session, claude_input(), "deny", note=note)
    decision, reason = verdict(run)
    assert decision == "deny"
    assert reason == f"denied by ana through the API: {note}"


async def test_plan_mode_denies_without_a_mail_and_workspace_mode_asks(
    world: World, human: Human
) -> None:
    session = await human.new_session("plan")
    run = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(run)
    assert decision == "deny" and "plan mode" in reason
    assert not [m for m in await human.mails(session) if m["type"] == "permission_request"]
    assert await human.permissions(session) == []
    # Negative control: the same call in workspace mode does ask.
    await human.set_mode(session, "workspace")
    run, _ = await ask_and_decide(world, human, session, claude_input(), "approve")
    assert verdict(run)[0] == "allow"


async def test_a_read_tool_is_allowed_without_asking_even_in_plan_mode(
    world: World, human: Human
) -> None:
    session = await human.new_session("plan")
    read = claude_input("Read", {"file_path": "/srv/shop/app.py"})
    # Without contacting the gateway at all: a dead URL changes nothing for Read,
    # while a guarded tool with the same dead URL is not allowed (negative control).
    dead = world.env(AGENTMAIL_SESSION_ID=session, AGENTMAIL_URL="http://127.0.0.1:9")
    live_read, dead_read, dead_bash = await run_many(
        [
            (CC, read, world.env(AGENTMAIL_SESSION_ID=session)),
            (CC, read, dead),
            (CC, claude_input(), dead),
        ],
        world.workdir,
    )
    assert verdict(live_read)[0] == "allow"
    assert verdict(dead_read)[0] == "allow"
    assert verdict(dead_bash)[0] == "deny"
    assert await human.permissions(session) == []


async def test_full_mode_allows_explicitly(world: World, human: Human) -> None:
    session = await human.new_session("full")
    run = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(run)
    assert decision == "allow" and "full mode" in reason
    assert await human.permissions(session) == []


async def test_a_deny_rule_refuses_in_full_mode_and_the_model_is_told_which(
    world: World, human: Human
) -> None:
    """docs/rules.md: a deny rule wins over full mode; the reason names the rule."""
    session = await human.new_session("full")
    r = await human.http.post(
        "/api/v1/rules",
        json={
            "effect": "deny",
            "tool_name": "Bash",
            "pattern": "npm test",
            "scope": "session",
            "session_id": session,
            "reason": "tests run in CI only",
        },
        headers=human.auth("ana"),
    )
    assert r.status_code == 201, r.text
    rule_id = r.json()["id"]
    run = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(run)
    assert decision == "deny"
    assert reason == f"denied by rule {rule_id}: tests run in CI only"
    [request] = await human.permissions(session)
    assert request["decided_by"] == f"rule:{rule_id}" and request["mail_id"] is None
    # Negative control: another command in the same session is allowed by full mode.
    other = claude_input(tool_input={"command": "make"})
    assert verdict(await world.hook(CC, other, AGENTMAIL_SESSION_ID=session))[0] == "allow"


async def test_an_allow_rule_allows_without_asking_anyone(world: World, human: Human) -> None:
    session = await human.new_session()
    r = await human.http.post(
        "/api/v1/rules",
        json={
            "effect": "allow",
            "tool_name": "Bash",
            "pattern": "npm",
            "scope": "session",
            "session_id": session,
        },
        headers=human.auth("ana"),
    )
    run = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    assert verdict(run) == ("allow", f"approved by rule {r.json()['id']}")
    assert not [m for m in await human.mails(session) if m["type"] == "permission_request"]


async def test_a_rule_file_the_agent_writes_counts_only_once_accepted_and_unchanged(
    world: World, human: Human, tmp_path: Path
) -> None:
    """docs/rules.md, "The rule file": the hook sends the hash of the file it reads;
    the gateway applies the file's allow rules only while that is the accepted one."""
    session = await human.new_session()
    rules_file = tmp_path / ".agentmail" / "rules.toml"
    rules_file.parent.mkdir()
    # The agent writes itself an allow rule.
    rules_file.write_text('[[rule]]\neffect = "allow"\ntool = "Bash"\npattern = "echo file-rule"\n')
    call = claude_input(tool_input={"command": "echo file-rule ok"}, cwd=str(tmp_path))
    run, request = await ask_and_decide(world, human, session, call, "deny")
    assert verdict(run)[0] == "deny" and request["status"] == "pending"  # asked: ignored

    async def accept(content: str) -> str:
        body = {"workspace": "/srv/shop", "content": content,
                "sha256": hashlib.sha256(content.encode()).hexdigest()}  # fmt: skip
        r = await human.http.post("/api/v1/rules/files", json=body, headers=human.auth("ana"))
        assert r.status_code == 201, r.text
        return str(r.json()["rules"][0]["id"]) if r.json()["rules"] else ""

    rule_id = await accept(rules_file.read_text())
    try:
        call = claude_input(tool_input={"command": "echo file-rule ok"}, cwd=str(tmp_path))
        run = await world.hook(CC, call, AGENTMAIL_SESSION_ID=session)
        assert verdict(run) == ("allow", f"approved by rule {rule_id}")
        # The agent changes the accepted file: asked again.
        rules_file.write_text(rules_file.read_text() + "# and more\n")
        call = claude_input(tool_input={"command": "echo file-rule ok"}, cwd=str(tmp_path))
        run, request = await ask_and_decide(world, human, session, call, "deny")
        assert verdict(run)[0] == "deny" and request["status"] == "pending"
    finally:
        await accept("")  # the shared gateway's /srv/shop has no file rules again


async def test_a_session_without_a_human_denies(world: World, human: Human) -> None:
    session = await human.new_session(sender="pi")  # pi mails claude: no human in it
    run = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(run)
    assert decision == "deny" and "no human" in reason


async def test_the_same_tool_use_id_twice_is_denied_at_once_the_second_time(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    payload = claude_input()
    first, _ = await ask_and_decide(world, human, session, payload, "approve")
    assert verdict(first)[0] == "allow"
    again = await world.hook(CC, payload, AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(again)
    assert decision == "deny" and "duplicate" in reason
    assert await human.permissions(session, "pending") == []  # nothing new to decide


async def test_two_tool_calls_in_one_session_are_two_requests_each_with_its_own_answer(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    platform_session = str(uuid.uuid4())
    tests = claude_input(session_id=platform_session)
    wipe = claude_input(tool_input={"command": "rm -rf build"}, session_id=platform_session)
    env = world.env(AGENTMAIL_SESSION_ID=session)
    async with anyio.create_task_group() as tasks:
        first = spawn(tasks, CC, tests, env, world.workdir)
        second = spawn(tasks, CC, wipe, env, world.workdir)
        pending = await human.wait_pending(session, count=2)
        assert len({p["id"] for p in pending}) == 2
        assert len({p["relay_key"] for p in pending}) == 2
        by_command = {p["tool_input"]["command"]: p for p in pending}
        await human.decide(by_command["rm -rf build"]["id"], "deny", note="keep build")
        await human.decide(by_command["npm test"]["id"], "approve")
        assert verdict(await first.result())[0] == "allow"
        assert verdict(await second.result()) == (
            "deny",
            "denied by ana through the API: keep build",
        )


async def test_another_requests_decision_arriving_first_is_ignored(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    async with anyio.create_task_group() as tasks:
        hook = spawn(
            tasks, CC, claude_input(), world.env(AGENTMAIL_SESSION_ID=session), world.workdir
        )
        [mine] = await human.wait_pending(session)
        # The same agent asks something else in the same session (as a bridge or a
        # second hook would); its approval reaches the waiting hook's stream first.
        other = await human.http.post(
            "/api/v1/agent/permissions",
            json={
                "session_id": session,
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "relay_key": f"other:{uuid.uuid4()}",
            },
            headers=human.auth("claude"),
        )
        assert other.status_code == 201, other.text
        await human.decide(other.json()["id"], "approve")
        await human.decide(mine["id"], "deny", note="mine is no")
        assert verdict(await hook.result()) == ("deny", "denied by ana through the API: mine is no")


async def test_nobody_deciding_times_out_with_a_reason_that_says_so(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    run = await world.hook(
        CC, claude_input(), AGENTMAIL_SESSION_ID=session, AGENTMAIL_HOOK_TIMEOUT="2"
    )
    decision, reason = verdict(run)
    assert decision == "deny" and "timed out" in reason
    assert "denied by" not in reason  # distinguishable from a person's refusal
    # The gateway gave up too: nobody can approve what the hook already refused.
    [request] = await human.permissions(session)
    assert request["status"] == "expired"


async def test_archiving_the_session_while_waiting_denies(world: World, human: Human) -> None:
    session = await human.new_session()
    async with anyio.create_task_group() as tasks:
        hook = spawn(
            tasks, CC, claude_input(), world.env(AGENTMAIL_SESSION_ID=session), world.workdir
        )
        await human.wait_pending(session)
        r = await human.http.patch(
            f"/api/v1/sessions/{session}", json={"archived": True}, headers=human.auth("ana")
        )
        assert r.status_code == 200, r.text
        decision, reason = verdict(await hook.result())
    assert decision == "deny" and "cancelled" in reason


async def test_always_grant_allows_the_next_matching_call_without_mail(
    world: World, human: Human
) -> None:
    session = await human.new_session()
    first, _ = await ask_and_decide(
        world, human, session, claude_input(), "approve", always=True, grant_pattern="npm test"
    )
    assert verdict(first)[0] == "allow"
    before = await human.mails(session)
    again = await world.hook(CC, claude_input(), AGENTMAIL_SESSION_ID=session)
    decision, reason = verdict(again)
    assert decision == "allow" and "standing grant" in reason
    assert await human.mails(session) == before  # no new mail to the human
    # Negative control: a command the grant does not cover is asked again.
    other = claude_input(tool_input={"command": "rm -rf build"})
    run, request = await ask_and_decide(world, human, session, other, "deny")
    assert verdict(run)[0] == "deny" and request["tool_input"]["command"] == "rm -rf build"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("data", id="gateway-data-dir"),
        pytest.param("settings", id="claude-user-settings"),
    ],
)
async def test_a_protected_path_is_refused_before_anyone_is_asked(
    world: World, human: Human, target: str
) -> None:
    path = (
        str(world.data_dir / "agentmail.db")
        if target == "data"
        else str(world.home / ".claude" / "settings.json")
    )
    write = claude_input("Write", {"file_path": path, "content": "{}"})
    sessions = [await human.new_session(mode) for mode in ("workspace", "full")]
    runs = await run_many(  # whatever the mode
        [(CC, write, world.env(AGENTMAIL_SESSION_ID=s)) for s in sessions], world.workdir
    )
    for session, run in zip(sessions, runs, strict=True):
        decision, reason = verdict(run)
        assert decision == "deny" and "protected" in reason
        assert await human.permissions(session) == []
    # Negative control: an ordinary file in the workspace is asked about.
    ordinary = claude_input("Write", {"file_path": "/srv/shop/app.py", "content": "x = 1"})
    session = await human.new_session()
    run, request = await ask_and_decide(world, human, session, ordinary, "approve")
    assert verdict(run)[0] == "allow" and request["tool_name"] == "Write"


async def test_an_interactive_session_asks_the_owner_in_a_session_bound_to_it(
    world: World, human: Human
) -> None:
    platform_session = str(uuid.uuid4())
    payload = claude_input(session_id=platform_session)
    env = world.env(AGENTMAIL_OWNER="ana")  # a terminal: no AGENTMAIL_SESSION_ID
    platform_id = f"{CC}:{platform_session}"
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, CC, payload, env, world.workdir)
        session = await human.wait_bound_session(platform_id)
        assert session["workspace"] == "/srv/shop"
        [request] = await human.wait_pending(session["id"])
        await human.decide(request["id"], "approve", note="ok from my phone")
        assert verdict(await hook.result()) == (
            "allow",
            "approved by ana through the API: ok from my phone",
        )
    # The next call of the same platform session lands in the same mail session.
    async with anyio.create_task_group() as tasks:
        hook = spawn(tasks, CC, claude_input(session_id=platform_session), env, world.workdir)
        [request] = await human.wait_pending(session["id"])
        await human.decide(request["id"], "deny")
        assert verdict(await hook.result()) == ("deny", "denied by ana through the API")
    assert len([s for s in await human.sessions() if s["platform_id"] == platform_id]) == 1


async def test_without_session_or_owner_the_platform_prompt_decides(
    world: World, human: Human
) -> None:
    before = await human.sessions()
    run = await world.hook(CC, claude_input())
    assert verdict(run)[0] == "ask"
    assert await human.sessions() == before  # nothing was created or asked


@pytest.mark.parametrize("where", ["mail-driven", "interactive"])
async def test_a_wrong_key_denies_at_once_even_in_an_interactive_session(
    world: World, human: Human, where: str
) -> None:
    session = await human.new_session()
    # A permanent failure (401) denies with the gateway's message; only transient
    # failures fall back to the platform's prompt in an interactive session.
    place = {"AGENTMAIL_SESSION_ID": session} if where == "mail-driven" else {}
    run = await world.hook(
        CC,
        claude_input(),
        AGENTMAIL_KEY="am_agent_not_a_real_key",
        AGENTMAIL_OWNER="ana",
        **place,
    )
    decision, reason = verdict(run)
    assert decision == "deny" and "401" in reason


async def test_unreadable_input_denies_and_still_exits_0(world: World) -> None:
    bad = ["not json", "[1, 2]", '{"tool_input": {}}', '{"tool_name": "Bash", "tool_input": 3}']
    for run in await run_many([(CC, text, world.env()) for text in bad], world.workdir):
        decision, reason = verdict(run)
        assert decision == "deny" and "could not read" in reason
