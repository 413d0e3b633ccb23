"""The real Gemini CLI (pinned in agent-clis.txt) driven by a real bridge against a
real gateway, with our scripted Gemini API server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge import real_cli
from tests.bridge.agent_clis import REPO, require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.gemini_server import GeminiServer, bad_key
from tests.fakes.scripted_http import answer, shell_then_answer

# A real-CLI turn takes 15-30 s on a loaded 2-core machine; two turns per test at most.
pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return require("@google/gemini-cli")


@pytest.fixture
def model() -> Iterator[GeminiServer]:
    with GeminiServer(answer("ok")) as server:
        yield server


@pytest.fixture
def cli(gemini_bin: Path, model: GeminiServer, agent: Agent) -> Iterator[real_cli.Cli]:
    home = agent.workspace.parent / "home"
    home.mkdir(exist_ok=True)
    # Gemini skips a settings file below a folder others may write to (/tmp):
    # the bridge's state dir (where the turn's settings live) goes elsewhere.
    state = REPO / ".cache" / "test-state" / agent.name
    agent.state_dir = state

    def start(agent: Agent, model: GeminiServer, *args: str) -> BridgeProcess:
        return agent.bridge(
            "--runner-arg", f"bin={gemini_bin}", "--runner-arg", "model=gemini-fake",
            "--runner-arg", f"home={home}", *args,
            runner="gemini", HOME=str(home), GOOGLE_GEMINI_BASE_URL=model.url,
            GEMINI_API_KEY="dummy",
        )  # fmt: skip

    def sessions(agent: Agent) -> dict[str, str]:
        return dict(json.loads((agent.state_dir / "sessions.json").read_text()))

    try:
        yield real_cli.Cli(start, model, bad_key(), sessions)
    finally:
        for bridge in agent.bridges:
            bridge.kill()
        shutil.rmtree(state, ignore_errors=True)


async def test_approve_runs_the_command_and_a_second_mail_resumes_the_chat(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    seen = await real_cli.approve_then_resume(human, agent, cli)
    # The chat file is Gemini's own, in the HOME the bridge runs with; the
    # heartbeat's reader finds it (the title is the bridge's prompt headline).
    from mailui4agents.bridge.runners.gemini import GeminiRunner

    runner = GeminiRunner({"home": str(agent.workspace.parent / "home")})
    found = {s["platform_id"]: s for s in runner.recent_sessions([str(agent.workspace)])}
    assert found[seen["platform_id"]]["cwd"] == str(agent.workspace)


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.deny_with_note(human, agent, cli)
    assert "denied by the hook: 1 call(s)" in agent.bridges[0].log


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.plan_then_full(human, agent, cli)
    offered = [
        {d["name"] for t in r["body"].get("tools") or [] for d in t.get("functionDeclarations", [])}
        for r in cli.model.model_requests()
    ]
    assert any("run_shell_command" not in names for names in offered)  # plan
    assert any("run_shell_command" in names for names in offered)  # full


async def test_a_bad_key_comes_back_as_a_failure_mail(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.bad_key_fails_in_plain_words(human, agent, cli)


def test_what_install_hook_and_install_mcp_write_is_what_the_real_gemini_runs(
    gemini_bin: Path, tmp_path: Path
) -> None:
    """A person's own Gemini: `install-hook gemini` and `install-mcp gemini` merge
    into ~/.gemini/settings.json (keeping the auth type already there); the real
    CLI lists the server and runs the hook, which here denies without asking
    anyone (a mail-driven session without an agent key). Without the hook the
    same command runs (the negative control)."""
    import os
    import subprocess
    import sys

    from mailui4agents.bridge.runners.gemini import policy_toml

    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    settings = home / ".gemini" / "settings.json"
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_toml())
    with GeminiServer(shell_then_answer(real_cli.MARKER, "DONE")) as model:
        path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        env = {"PATH": path, "HOME": str(home), "GOOGLE_GEMINI_BASE_URL": model.url,
               "GEMINI_API_KEY": "dummy", "GEMINI_CLI_NO_RELAUNCH": "true",
               "AGENTMAIL_URL": "http://127.0.0.1:9"}  # fmt: skip
        for command in (["install-hook", "gemini"], ["install-mcp", "gemini"]):
            subprocess.run([sys.executable, "-m", "mailui4agents.cli.main", *command],
                           check=True, capture_output=True, env=env)  # fmt: skip
        assert json.loads(settings.read_text())["security"]["auth"]["selectedType"]
        listed = subprocess.run([str(gemini_bin), "mcp", "list"], env=env, text=True, cwd=work,
                                capture_output=True, timeout=120)  # fmt: skip
        assert "agentmail" in listed.stdout + listed.stderr

        def turn() -> str:
            done = subprocess.run(
                [str(gemini_bin), "-p", "create the marker", "--output-format", "stream-json",
                 "--skip-trust", "--policy", str(policy), "-m", "gemini-fake"],
                cwd=work, text=True, capture_output=True, timeout=120,
                env={**env, "AGENTMAIL_SESSION_ID": "a-mail-session"},
            )  # fmt: skip
            return done.stdout

        out = turn()
        assert not (work / "marker.txt").exists()
        assert "the hook needs an agent key" in out
        data = json.loads(settings.read_text())
        del data["hooks"]
        settings.write_text(json.dumps(data))
        turn()
        assert (work / "marker.txt").exists()
