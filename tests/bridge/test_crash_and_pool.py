"""Crash safety and the pool, end to end (real gateway, real bridge, fake agent)."""

from __future__ import annotations

import itertools

import anyio
import pytest

from tests.bridge.harness import Agent, Human, dead

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

KILLS = 20


@pytest.mark.timeout(600)  # 21 bridge lives; about a minute on 2 busy cores
async def test_sigkill_mid_turn_again_and_again_completes_every_mail_exactly_once(
    human: Human, agent: Agent
) -> None:
    """Each life of the bridge: finish the interrupted mail (redelivered with the
    interrupted headline), start the next one, and get SIGKILLed in the middle."""
    bridge = agent.bridge()
    mails = [await human.send(f"{agent.name}@{agent.workspace}.new", "!hang-once", mode="full")]
    session = mails[0]["session_id"]
    hung: list[dict[str, object]] = []
    for i in range(KILLS):
        current = mails[-1]["id"]
        records = await agent.wait_record(
            lambda rs, m=current: any(r["event"] == "hang" and r["mail_id"] == m for r in rs)
        )
        hung.append(next(r for r in records if r["event"] == "hang" and r["mail_id"] == current))
        bridge.kill()
        if i < KILLS - 1:  # sent while the bridge is down: found by the catch-up
            mails.append(
                await human.send(
                    f"{agent.name}@{agent.workspace}", "!hang-once", parent=mails[-1]["id"]
                )
            )
        bridge = agent.bridge()
    for mail in mails:
        await human.wait_reply(session, mail["id"])
    bridge.stop()
    all_mail = await human.mails(session)
    for mail in mails:
        replies = [m for m in all_mail if m.get("parent_mail_id") == mail["id"]]
        assert [r["type"] for r in replies] == ["relay"], mail["id"]
        ends = [r for r in agent.records() if r["event"] == "end" and r["mail_id"] == mail["id"]]
        assert len(ends) == 1, mail["id"]
        starts = agent.starts(mail["id"])
        assert len(starts) == 2
        assert not starts[0]["headline"].startswith("REDELIVERED")
        assert starts[1]["headline"].startswith("REDELIVERED MAIL from a human (ana")
        assert "interrupted" in starts[1]["headline"]
    # Every hung turn's processes were stopped by the next life, none left running.
    for record in hung:
        assert await dead(int(str(record["pid"]))) and await dead(int(str(record["child"])))


async def test_three_sessions_of_five_mails_with_concurrency_two(
    human: Human, agent: Agent
) -> None:
    agent.bridge("--concurrency", "2")
    order: dict[str, list[str]] = {}
    for s in range(3):
        first = await human.send(
            f"{agent.name}@{agent.workspace}.new", "!sleep 0.3", subject=f"s{s}", mode="full"
        )
        order[first["session_id"]] = [first["id"]]
    for _ in range(4):
        for session, ids in order.items():
            sent = await human.send(f"{agent.name}@{agent.workspace}", "!sleep 0.3", parent=ids[-1])
            assert sent["session_id"] == session
            ids.append(sent["id"])
    for session, ids in order.items():
        for mail_id in ids:
            await human.wait_reply(session, mail_id)
    records = agent.records()
    spans: dict[str, tuple[float, float]] = {}
    for r in records:
        start, end = spans.get(r["mail_id"], (0.0, 0.0))
        if r["event"] == "start":
            spans[r["mail_id"]] = (r["t"], end)
        elif r["event"] == "end":
            spans[r["mail_id"]] = (start, r["t"])
    assert len(spans) == 15 and all(e > s for s, e in spans.values())
    for ids in order.values():
        started = sorted(ids, key=lambda m: spans[m][0])
        assert started == ids  # per-session order kept
        for before, after in itertools.pairwise(ids):
            assert spans[before][1] <= spans[after][0]  # strictly serial
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2


async def test_a_turn_parked_on_a_human_frees_its_place_and_its_clock_pauses(
    human: Human, agent: Agent
) -> None:
    """--concurrency 1: while A waits for a decision, B runs; A outlives its
    --turn-timeout of 3 s because the clock stops while it is parked."""
    agent.bridge("--concurrency", "1", "--turn-timeout", "3")
    a = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo a > a.txt", mode="workspace"
    )
    request = await human.wait_pending(a["session_id"])
    b = await human.send(f"{agent.name}@{agent.workspace}.new", "quick", mode="full")
    await human.wait_reply(b["session_id"], b["id"])
    # A has now been parked for a while; wait past its turn timeout before deciding.
    await anyio.sleep(3.5)  # the point of the test: real time passes while parked
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(a["session_id"], a["id"])
    assert reply["type"] == "relay" and "ran [echo a > a.txt]" in reply["body"]


async def test_mail_that_arrives_while_parked_reaches_the_model_with_the_decision(
    human: Human, agent: Agent
) -> None:
    """A human's correction sent while the agent waits is told to the model with the
    decision, and is still delivered as the session's next turn."""
    agent.bridge()
    first = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo a > a.txt", mode="workspace"
    )
    request = await human.wait_pending(first["session_id"])
    correction = await human.send(
        f"{agent.name}@{agent.workspace}", "no, the other repository!", parent=first["id"]
    )
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(first["session_id"], first["id"])
    assert "no, the other repository!" in reply["body"]  # in the reason the model got
    assert "While you waited, 1 more mail(s)" in reply["body"]
    second = await human.wait_reply(first["session_id"], correction["id"])
    assert second["type"] == "relay"
    assert "no, the other repository!" in agent.starts(correction["id"])[0]["prompt"]
