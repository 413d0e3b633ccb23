"""A turn whose CLI had finished before the bridge died is not run again (issue 22,
item 7): real gateway, real bridge killed with SIGKILL at a chosen step, the fake
agent CLI counting its runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailui4agents.bridge.failures import Failure
from mailui4agents.bridge.results import Results, TurnResult
from tests.bridge.harness import Agent, Human


def ledger_lines(agent: Agent, mail_id: str) -> list[dict[str, object]]:
    path = agent.state_dir / "ledger.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [line for line in lines if line["mail_id"] == mail_id]


@pytest.mark.anyio
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("body", "reply_type", "said"),
    [
        ("!bash echo run >> runs.txt", "relay", "ran [echo run >> runs.txt]"),
        ("!error API error 401: invalid x-api-key", "failure", "not logged in"),
    ],
    ids=["answer", "failure"],
)
async def test_a_finished_turn_is_settled_from_its_result_file_after_a_crash(
    human: Human, agent: Agent, body: str, reply_type: str, said: str
) -> None:
    """Killed after the CLI exited and its result file was written, before anything
    was posted or recorded: the next life posts the reply once and runs nothing."""
    bridge = agent.bridge(crash_at="result")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="full")
    assert await agent.wait_frozen() == sent["id"]
    assert [r["event"] for r in agent.records()] == ["start", "end"]  # the CLI finished
    assert await human.replies_to(sent["session_id"], sent["id"]) == []
    bridge.kill()
    assert [line["state"] for line in ledger_lines(agent, sent["id"])] == ["delivered", "started"]
    assert (agent.state_dir / "results" / f"{sent['id']}.json").exists()

    bridge = agent.bridge()
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    await agent.wait_ledger(f'"mail_id":"{sent["id"]}","state":"completed"')
    assert reply["type"] == reply_type and said in reply["body"]
    assert len(agent.starts(sent["id"])) == 1  # the fake CLI ran once, in the first life
    if reply_type == "relay":
        assert (agent.workspace / "runs.txt").read_text() == "run\n"
    assert len(await human.replies_to(sent["session_id"], sent["id"])) == 1
    states = [line["state"] for line in ledger_lines(agent, sent["id"])]
    assert states == ["delivered", "started", "completed"]  # no second attempt
    assert list((agent.state_dir / "results").iterdir()) == []
    assert "settled from its result file, not run again" in bridge.log
    # The session goes on: the next mail resumes the platform session of the first.
    after = await human.send(
        f"{agent.name}@{agent.workspace}", "next", mode=None, parent=sent["id"]
    )
    reply = await human.wait_reply(after["session_id"], after["id"])
    assert reply["type"] == "relay"
    assert agent.starts(after["id"])[0]["headline"].startswith("NEW MAIL from a human")


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_reply_posted_before_the_crash_is_not_posted_twice(
    human: Human, agent: Agent
) -> None:
    """Killed after the reply was posted, before the ledger line: the next life posts
    it again from the result file under the same relay key, which the gateway takes
    as the same mail."""
    bridge = agent.bridge(crash_at="completed")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    assert await agent.wait_frozen() == sent["id"]
    first = await human.replies_to(sent["session_id"], sent["id"])
    assert [m["type"] for m in first] == ["relay"]
    bridge.kill()

    bridge = agent.bridge()
    await agent.wait_ledger(f'"mail_id":"{sent["id"]}","state":"completed"')
    replies = await human.replies_to(sent["session_id"], sent["id"])
    assert [m["id"] for m in replies] == [first[0]["id"]]
    assert len(agent.starts(sent["id"])) == 1
    completed = ledger_lines(agent, sent["id"])[-1]
    assert completed["outcome"] == "answered" and completed["own"] == [first[0]["id"]]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_turn_killed_while_its_cli_ran_is_run_again_and_says_so(
    human: Human, agent: Agent
) -> None:
    """No result to recover (the CLI was still running): the turn runs again with
    the headline that says the previous attempt was interrupted."""
    bridge = agent.bridge()
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "!hang-once", mode="full")
    await agent.wait_record(lambda rs: any(r["event"] == "hang" for r in rs))
    bridge.kill()
    agent.bridge()
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "relay"
    starts = agent.starts(sent["id"])
    assert len(starts) == 2 and "interrupted" in starts[1]["headline"]


def test_a_result_file_is_written_whole_and_read_back(tmp_path: Path) -> None:
    results = Results.open(tmp_path / "results")
    answer = TurnResult("m-1", 2, None, text="héllo", sent=("x",), model_sent=True)
    failed = TurnResult("m-2", 1, Failure("timeout", "stopped"))
    results.save(answer)
    results.save(failed)
    assert results.load("m-1") == answer and results.load("m-2") == failed
    assert results.load("m-3") is None
    # An id that is no plain file name cannot reach outside the folder.
    odd = TurnResult("../../etc/x", 1, None)
    results.save(odd)
    assert results.path(odd.mail_id).parent == tmp_path / "results"
    assert results.load(odd.mail_id) == odd
    # A file that is not a result is ignored, not fatal; leftovers of a torn write go.
    results.path("m-1").write_text("{not json")
    assert results.load("m-1") is None
    results.path("m-4").write_text(json.dumps({**failed.to_json(), "mail_id": "m-4",
                                               "failure": {"kind": "nonsense"}}))  # fmt: skip
    assert results.load("m-4") is None
    (tmp_path / "results" / ".m-5.json.1.tmp").write_text("half")
    Results.open(tmp_path / "results")
    assert not (tmp_path / "results" / ".m-5.json.1.tmp").exists()
    results.drop("m-2")
    results.drop("m-2")  # twice: no error
    assert results.load("m-2") is None
