"""`agentmail bridge --metrics-port`: the bridge's own metrics after real turns of
the command runner (docs/metrics.md, "Bridge"), and its JSON log lines."""

from __future__ import annotations

import json
import re
import socket
import sys

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.bridge.harness import Agent, BridgeProcess, Human

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

METRICS_AT = re.compile(r"bridge metrics on (http://127\.0\.0\.1:\d+/metrics)")


def scrape(url: str) -> dict[str, float]:
    """Sample name + labels -> value, parsed by prometheus_client."""
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200, r.text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def metrics_url(bridge: BridgeProcess) -> str:
    for line in bridge.output:
        entry = json.loads(line)  # --log-format json: every line is one object
        m = METRICS_AT.search(entry["message"])
        if m:
            return m.group(1)
    raise AssertionError(bridge.log)


async def test_turns_parked_and_queued_after_command_runner_turns(
    human: Human, agent: Agent
) -> None:
    bridge = agent.bridge("--metrics-port", "0", "--log-format", "json")
    url = metrics_url(bridge)
    before = scrape(url)
    assert before["agentmail_bridge_turns_queued{}"] == 0
    assert not any(k.startswith("agentmail_bridge_turns_total") for k in before)

    first = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    await human.wait_reply(first["session_id"], first["id"])
    m = scrape(url)
    assert m["agentmail_bridge_turns_total{outcome=done,runner=command}"] == 1
    assert m["agentmail_bridge_turn_duration_seconds_count{runner=command}"] == 1
    assert (m["agentmail_bridge_turns_running{}"], m["agentmail_bridge_turns_parked{}"]) == (0, 0)

    asking = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(asking["session_id"])
    m = scrape(url)
    assert m["agentmail_bridge_turns_parked{}"] == 1  # waiting on ana, not counted as running
    assert m["agentmail_bridge_turns_running{}"] == 0
    assert m["agentmail_bridge_turns_total{outcome=done,runner=command}"] == 1
    await human.decide(request["id"], "approve")
    await human.wait_reply(asking["session_id"], asking["id"])
    m = scrape(url)
    assert m["agentmail_bridge_turns_total{outcome=done,runner=command}"] == 2
    assert m["agentmail_bridge_turn_duration_seconds_count{runner=command}"] == 2
    assert m["agentmail_bridge_turns_parked{}"] == 0
    assert agent.key not in bridge.log


async def test_a_port_in_use_stops_the_bridge_with_one_line(agent: Agent) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await anyio.run_process(
            [sys.executable, "-m", "mailui4agents.cli.main", "bridge", "--agent", agent.name,
             "--runner", "command", "--state-dir", str(agent.state_dir),
             "--metrics-port", str(port), "--", sys.executable, "-c", "pass"],
            env=agent.env(), check=False,
        )  # fmt: skip
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert f"error: --metrics-port {port} on 127.0.0.1: " in stderr
    assert "Traceback" not in stderr
