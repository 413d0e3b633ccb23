"""The end-to-end scenarios every real agent CLI goes through, written once.

Each CLI's test module (test_codex_e2e.py, test_gemini_e2e.py) gives a
:class:`Cli`: how to start a real bridge for it against a scripted model
server, and calls these scenarios. A real gateway, a real bridge, the real CLI
from the npm registry at its pinned version, our scripted model on 127.0.0.1.
Each scenario keeps its real-CLI turns few (CI has 2 cores).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.scripted_http import ScriptedServer, SeenScript, answer, shell_then_answer

MARKER = "echo hi > marker.txt"
TURN_S = 120.0  # one real-CLI turn on a loaded 2-core machine, with room to spare


@dataclass
class Cli:
    """One agent CLI under test."""

    start: Callable[..., BridgeProcess]  # (agent, model, *bridge args) -> a started bridge
    model: ScriptedServer
    bad_key: SeenScript  # the script that answers 401
    platform_sessions: Callable[[Agent], dict[str, str]]  # sessions.json


def codex_bridge(
    agent: Agent, model_url: str, codex_bin: str | Path, *args: str, sandbox: bool = False
) -> BridgeProcess:
    """A bridge running real Codex against our Responses model at `model_url`, its
    config and HOME beside the agent's workspace."""
    config = agent.workspace.parent / "codex-config.toml"
    config.write_text(
        'model = "fake-model"\nmodel_provider = "fake"\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n'
        'env_key = "FAKE_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
    )
    return agent.bridge(
        "--runner-arg", f"bin={codex_bin}", "--runner-arg", f"config={config}", *args,
        runner="codex", sandbox=sandbox, FAKE_API_KEY="dummy", HOME=str(agent.workspace.parent),
    )  # fmt: skip


def address(agent: Agent, new: bool = True) -> str:
    return f"{agent.name}@{agent.workspace}" + (".new" if new else "")


async def approve_then_resume(human: Human, agent: Agent, cli: Cli) -> dict[str, Any]:
    """workspace: the command waits for a person; approved, it runs and the final
    text comes back. A second mail then resumes the same platform session."""
    cli.model.script = shell_then_answer(MARKER, "DONE")
    cli.start(agent, cli.model)
    sent = await human.send(address(agent), "create the marker", mode="workspace")
    request = await human.wait_pending(sent["session_id"], TURN_S)
    assert MARKER in json.dumps(request["tool_input"])
    assert not (agent.workspace / "marker.txt").exists()
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert reply["type"] == "relay" and reply["session_id"] == sent["session_id"]
    assert reply["body"].startswith("DONE")
    told = cli.model.told()
    assert "NEW TASK from a human (ana@" in told and "create the marker" in told
    sessions = cli.platform_sessions(agent)
    platform_id = sessions[sent["session_id"]]
    # The second mail: the same platform session, the whole history resent.
    cli.model.script = answer("still here")
    before = len(cli.model.model_requests())
    second = await human.send(address(agent, new=False), "which file did you make?",
                              parent=sent["id"])  # fmt: skip
    reply2 = await human.wait_reply(second["session_id"], second["id"], TURN_S)
    assert reply2["type"] == "relay" and reply2["body"] == "still here"
    later = json.dumps([r["body"] for r in cli.model.model_requests()[before:]])
    assert "create the marker" in later and "which file did you make?" in later
    assert cli.platform_sessions(agent)[sent["session_id"]] == platform_id
    return {"platform_id": platform_id, "later": later}


async def deny_with_note(human: Human, agent: Agent, cli: Cli) -> None:
    cli.model.script = shell_then_answer(MARKER, "DONE")
    cli.start(agent, cli.model)
    sent = await human.send(address(agent), "create the marker", mode="workspace")
    request = await human.wait_pending(sent["session_id"], TURN_S)
    await human.decide(request["id"], "deny", note="use the staging database")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert not (agent.workspace / "marker.txt").exists()
    assert reply["type"] == "relay"
    # What the model was told after the tool call carries the human's note.
    assert "use the staging database" in reply["body"]  # the fake quotes the tool result
    assert "use the staging database" in cli.model.told()


async def plan_then_full(human: Human, agent: Agent, cli: Cli) -> None:
    cli.model.script = shell_then_answer(MARKER, "DONE")
    cli.start(agent, cli.model)
    plan = await human.send(address(agent), "create the marker", mode="plan")
    await human.wait_reply(plan["session_id"], plan["id"], TURN_S)
    assert not (agent.workspace / "marker.txt").exists()
    assert await human.all_permissions(plan["session_id"]) == []
    full = await human.send(address(agent), "create the marker", mode="full")
    reply = await human.wait_reply(full["session_id"], full["id"], TURN_S)
    assert (agent.workspace / "marker.txt").read_text() == "hi\n"
    assert await human.all_permissions(full["session_id"]) == []
    assert reply["type"] == "relay" and reply["body"].startswith("DONE")


async def bad_key_fails_in_plain_words(human: Human, agent: Agent, cli: Cli) -> dict[str, Any]:
    cli.model.script = cli.bad_key
    cli.start(agent, cli.model)
    sent = await human.send(address(agent), "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert reply["type"] == "failure", reply
    assert (
        "not logged in" in reply["body"]
        and "What to do: Log the agent CLI in again" in (reply["body"])
    )
    return dict(reply)
