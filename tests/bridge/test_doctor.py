"""`agentmail doctor`: against a real gateway, with a real agent key, and the
hook dry run through the same command line the bridge wires in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mailui4agents.cli import doctor
from mailui4agents.testing import GatewayProcess, clean_env
from tests.bridge.harness import Agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "doctor", *args],
        capture_output=True, text=True, timeout=120, env=clean_env(**env),
    )  # fmt: skip


async def test_a_good_key_and_a_working_hook_are_all_good(agent: Agent, tmp_path: Path) -> None:
    fake_cli = tmp_path / "codex"
    fake_cli.write_text("#!/bin/sh\necho 'codex-cli 0.171.0'\n")
    fake_cli.chmod(0o755)
    done = run("--runner", "codex", "--runner-arg", f"bin={fake_cli}",
               AGENTMAIL_URL=agent.url, AGENTMAIL_KEY=agent.key)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok    credential: the gateway accepts the agent key" in done.stdout
    assert "ok    cli: codex 0.171.0" in done.stdout
    assert "ok    hook allows a read: codex: {}" in done.stdout
    assert "ok    hook denies a protected path" in done.stdout


async def test_a_refused_key_a_missing_cli_and_a_down_gateway_say_what_to_fix(
    agent: Agent, gateway: GatewayProcess
) -> None:
    bad = run("--runner", "gemini", "--runner-arg", "bin=/no/such/gemini",
              AGENTMAIL_URL=agent.url, AGENTMAIL_KEY=agent.key + "x")  # fmt: skip
    assert bad.returncode == 1
    assert "FAIL  credential" in bad.stdout and "the key was refused" in bad.stdout
    assert "FAIL  cli: the Gemini CLI (/no/such/gemini) was not found" in bad.stdout
    assert "fix: run scripts/install-agent-clis.sh" in bad.stdout
    down = run(AGENTMAIL_URL="http://127.0.0.1:9", AGENTMAIL_KEY=agent.key)
    assert down.returncode == 1 and "FAIL  gateway" in down.stdout


def test_a_hook_that_cannot_start_fails_the_dry_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailui4agents.bridge.runners import claude_code

    monkeypatch.setattr(claude_code, "agentmail_command", lambda *a: ["/no/such/python", *a])
    checks = doctor.check_hook("codex")
    assert [c.status for c in checks] == ["FAIL", "ok"]  # the wrapper still blocks
    assert "would deny" in checks[0].detail


@pytest.mark.parametrize(
    ("platform", "out", "code", "verdict"),
    [
        ("codex", "{}", 0, "allow"),
        ("codex", '{"decision":"allow"}', 0, None),
        ("claude-code", "{}", 0, None),
        ("gemini", '{"decision":"deny","reason":"x"}', 0, "deny"),
        ("gemini", "not json", 0, None),
        ("gemini", "", 1, None),
        ("zcode", '{"decision":"approve"}', 0, "allow"),
        ("generic", "", 2, "deny"),
    ],
)
def test_verdicts_as_each_platform_reads_them(
    platform: str, out: str, code: int, verdict: str | None
) -> None:
    assert doctor.verdict(platform, out, code) == verdict
