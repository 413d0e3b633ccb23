"""The command runner end to end: real gateway, real bridge, the fake agent CLI."""

from __future__ import annotations

import pytest

from tests.bridge.harness import Agent, Human, dead

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_approved_command_runs_and_the_answer_comes_back_as_a_relay(
    human: Human, agent: Agent
) -> None:
    agent.bridge()
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash"
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["relay"] is True
    assert reply["session_id"] == sent["session_id"]
    assert f"DONE mail={sent['id']}" in reply["body"]
    assert "ran [echo hi > marker.txt]" in reply["body"]
    start = agent.starts(sent["id"])[0]
    assert start["headline"].startswith("NEW TASK from a human (ana")
    assert start["cwd"] == str(agent.workspace) and start["pwd"] == str(agent.workspace)
    assert start["mode"] == "workspace"


async def test_denial_with_a_note_reaches_the_model_and_nothing_runs(
    human: Human, agent: Agent
) -> None:
    agent.bridge()
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(sent["session_id"])
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert not (agent.workspace / "marker.txt").exists()
    assert "denied [echo hi > marker.txt]" in reply["body"]
    assert "use the staging database" in reply["body"]


async def test_plan_mode_refuses_without_asking_and_full_mode_runs_without_asking(
    human: Human, agent: Agent
) -> None:
    agent.bridge()
    plan = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="plan"
    )
    reply = await human.wait_reply(plan["session_id"], plan["id"])
    assert "denied [echo hi > marker.txt]" in reply["body"]
    assert not (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(plan["session_id"]) == []
    assert "Permission mode: plan" in agent.starts(plan["id"])[0]["prompt"]

    full = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="full"
    )
    reply = await human.wait_reply(full["session_id"], full["id"])
    assert "ran [echo hi > marker.txt]" in reply["body"]
    assert (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(full["session_id"]) == []


async def test_a_second_mail_resumes_the_same_platform_session(human: Human, agent: Agent) -> None:
    agent.bridge()
    first = await human.send(f"{agent.name}@{agent.workspace}.new", "first", mode="full")
    await human.wait_reply(first["session_id"], first["id"])
    second = await human.send(
        f"{agent.name}@{agent.workspace}", "second", mode=None, parent=first["id"]
    )
    assert second["session_id"] == first["session_id"]
    reply = await human.wait_reply(second["session_id"], second["id"])
    assert "earlier=1" in reply["body"]
    one, two = agent.starts(first["id"])[0], agent.starts(second["id"])[0]
    assert one["platform_session_id"] == ""
    assert two["platform_session_id"].startswith("fake-")
    assert two["headline"].startswith("NEW MAIL from a human (ana")


async def test_agent_mail_gets_no_auto_relay_and_a_human_mail_does(
    human: Human, agent: Agent
) -> None:
    """Agent → agent: the model must answer itself (no relay); the receiving
    bridge still runs the turn and the prompt says an agent wrote."""
    agent.bridge()
    other = await human.new_agent(agent.workspace.parent / "other", agent.url)
    from mailui4agents.client import AsyncClient, ClientConfig, MailOut

    # other works in a session ana started with it: from there it may set the
    # agent to work (docs/access.md, "Who may set an agent to work").
    origin = await human.send(f"{other.name}@{other.workspace}.new", "coordinate")
    async with AsyncClient(ClientConfig(url=agent.url, key=other.key)) as client:
        sent = await client.send_mail(
            [f"{agent.name}@{agent.workspace}.new"],
            "hi",
            "do it",
            from_session_id=origin["session_id"],
        )
    assert isinstance(sent, MailOut), sent  # not a Duplicate
    await agent.wait_record(
        lambda rs: any(r["event"] == "end" and r["mail_id"] == sent.id for r in rs)
    )
    start = agent.starts(sent.id)[0]
    assert start["headline"].startswith(f"NEW TASK from another agent ({other.name}")
    assert "nothing is sent back automatically" in start["prompt"]
    # The human's mail in a fresh session does get its relay, after the agent's turn.
    mine = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    await human.wait_reply(mine["session_id"], mine["id"])
    async with AsyncClient(ClientConfig(url=agent.url, key=other.key)) as client:
        thread = await client.thread(sent.id, session_id=sent.session_id)
    assert [m.type for m in thread.items] == ["message"]


async def test_the_model_mailing_by_itself_suppresses_the_relay(human: Human, agent: Agent) -> None:
    agent.bridge()
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!reply my own answer", mode="full"
    )
    await agent.wait_ledger('"outcome":"mailed_itself"')
    mails = await human.mails(sent["session_id"])
    own = [m for m in mails if m["from"].startswith(agent.name)]
    assert [(m["type"], m["body"]) for m in own] == [("message", "my own answer")]


async def test_a_missing_workspace_is_refused_with_a_failure_mail(
    human: Human, agent: Agent
) -> None:
    agent.bridge()
    missing = agent.workspace / "not" / "made"  # inside the bridge's roots
    sent = await human.send(f"{agent.name}@{missing}.new", "hi", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure"
    assert "workspace does not exist" in reply["body"]
    assert agent.starts() == []


async def test_failures_are_mailed_in_plain_words(human: Human, agent: Agent) -> None:
    agent.bridge("--max-attempts", "2")
    cases = {
        "!error API error 401: invalid x-api-key": "not logged in",
        "!error API Error: Request rejected (429) · Your credit balance is too low": "credit",
        "!exit 3 something broke": "failed again and again",
    }
    for body, expected in cases.items():
        sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="full")
        reply = await human.wait_reply(sent["session_id"], sent["id"])
        assert reply["type"] == "failure", reply
        assert expected in reply["body"], reply["body"]
        assert "What to do:" in reply["body"]
    # The permanent ones ran once; the unclear exit was retried up to --max-attempts.
    records = agent.records()
    attempts = [r["mail_id"] for r in records if r["event"] == "start"]
    assert sorted(attempts.count(m) for m in set(attempts)) == [1, 1, 2]


async def test_a_hanging_turn_is_killed_with_its_group_and_the_session_goes_on(
    human: Human, agent: Agent
) -> None:
    agent.bridge("--turn-timeout", "2")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "!hang", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure"
    assert "timed out" in reply["subject"] and "timed out" in reply["body"]
    hang = next(r for r in agent.records() if r["event"] == "hang")
    assert await dead(hang["pid"]) and await dead(hang["child"])
    after = await human.send(
        f"{agent.name}@{agent.workspace}", "next", mode=None, parent=sent["id"]
    )
    reply = await human.wait_reply(after["session_id"], after["id"])
    assert reply["type"] == "relay" and "DONE" in reply["body"]


async def test_a_missing_cli_is_mailed_in_plain_words(human: Human, agent: Agent) -> None:
    agent.bridge("--", "/no/such/agent-cli")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hi", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure"
    assert "not installed" in reply["body"] and "/no/such/agent-cli" in reply["body"]
