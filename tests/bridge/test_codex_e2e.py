"""The real Codex CLI (pinned in agent-clis.txt) driven by a real bridge against a
real gateway, with our scripted OpenAI Responses server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge import real_cli
from tests.bridge.agent_clis import REPO, require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.fakes.responses_server import ResponsesServer, bad_key
from tests.fakes.scripted_http import answer, shell_then_answer

# A real-CLI turn takes 15-30 s on a loaded 2-core machine; two turns per test at most.
pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return require("@openai/codex")


@pytest.fixture
def model() -> Iterator[ResponsesServer]:
    with ResponsesServer(answer("ok")) as server:
        yield server


@pytest.fixture
def cli(codex_bin: Path, model: ResponsesServer, agent: Agent) -> Iterator[real_cli.Cli]:
    # Codex refuses to link its sandbox helper under a temporary dir, and with
    # bubblewrap installed every command then fails: keep CODEX_HOME (in the
    # bridge's state dir) out of /tmp.
    state = REPO / ".cache" / "test-state" / agent.name
    agent.state_dir = state

    def start(agent: Agent, model: ResponsesServer, *args: str) -> BridgeProcess:
        return real_cli.codex_bridge(agent, model.url, codex_bin, *args)

    def sessions(agent: Agent) -> dict[str, str]:
        return dict(json.loads((agent.state_dir / "sessions.json").read_text()))

    try:
        yield real_cli.Cli(start, model, bad_key(), sessions)
    finally:
        for bridge in agent.bridges:
            bridge.kill()
        shutil.rmtree(state, ignore_errors=True)


async def test_approve_runs_the_command_and_a_second_mail_resumes_the_thread(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    seen = await real_cli.approve_then_resume(human, agent, cli)
    # The resumed turn went to the same rollout, and the model saw the approved run.
    home = agent.state_dir / "codex-home"
    rollouts = list((home / "sessions").glob(f"*/*/*/rollout-*-{seen['platform_id']}.jsonl"))
    assert len(rollouts) == 1 and "which file did you make?" in rollouts[0].read_text()
    # The heartbeat's reader finds the thread in the bridge's CODEX_HOME.
    from mailui4agents.bridge.runners.codex import rollout_info

    info = rollout_info(rollouts[0])
    assert info is not None and info["platform_id"] == seen["platform_id"]
    assert info["cwd"] == str(agent.workspace)


async def test_deny_with_a_note_the_model_is_told_the_note(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.deny_with_note(human, agent, cli)
    # Denied from the rollout (the stream shows no command_execution for it).
    assert "denied by the hook: 1 call(s)" in agent.bridges[0].log


async def test_plan_asks_nobody_and_changes_nothing_full_runs_without_asking(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.plan_then_full(human, agent, cli)
    sandboxes = [r["headers"].get("x-codex-turn-metadata", "") for r in cli.model.model_requests()]
    assert any('"read-only"' in s for s in sandboxes), sandboxes
    assert any('"danger-full-access"' in s for s in sandboxes), sandboxes


async def test_a_bad_key_comes_back_as_a_failure_mail(
    human: Human, agent: Agent, cli: real_cli.Cli
) -> None:
    await real_cli.bad_key_fails_in_plain_words(human, agent, cli)


def test_what_install_hook_and_install_mcp_write_is_what_the_real_codex_runs(
    codex_bin: Path, tmp_path: Path
) -> None:
    """A person's own Codex: `install-hook codex` writes hooks.json, which Codex
    runs (here: in a mail-driven session without an agent key, so the hook
    denies without asking anyone, and the model is told why); `install-mcp
    codex` adds a server that `codex mcp list` shows enabled. Without the
    hook file the same command runs (the negative control)."""
    import os
    import subprocess
    import sys

    home = REPO / ".cache" / "test-state" / f"codex-home-{tmp_path.name}"
    home.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    try:
        with ResponsesServer(shell_then_answer(real_cli.MARKER, "DONE")) as model:
            (home / "config.toml").write_text(
                'model = "fake-model"\nmodel_provider = "fake"\n[model_providers.fake]\n'
                f'name = "fake"\nbase_url = "{model.url}/v1"\nwire_api = "responses"\n'
                'env_key = "FAKE_API_KEY"\n'
            )
            path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
            env = {"PATH": path, "HOME": str(tmp_path), "CODEX_HOME": str(home),
                   "FAKE_API_KEY": "dummy", "AGENTMAIL_URL": "http://127.0.0.1:9"}  # fmt: skip
            for command in (["install-hook", "codex"], ["install-mcp", "codex"]):
                subprocess.run([sys.executable, "-m", "mailui4agents.cli.main", *command],
                               check=True, capture_output=True, env=env)  # fmt: skip
            listed = subprocess.run([str(codex_bin), "mcp", "list"], env=env, text=True,
                                    capture_output=True, timeout=60)  # fmt: skip
            assert "agentmail" in listed.stdout and "enabled" in listed.stdout

            def turn() -> str:
                done = subprocess.run(
                    [str(codex_bin), "exec", "--json", "--skip-git-repo-check",
                     "--dangerously-bypass-hook-trust", "-s", "workspace-write", "-"],
                    input="create the marker", cwd=work, text=True, capture_output=True,
                    timeout=120, env={**env, "AGENTMAIL_SESSION_ID": "a-mail-session"},
                )  # fmt: skip
                return done.stdout

            out = turn()
            assert not (work / "marker.txt").exists()
            assert "the hook needs an agent key" in out
            (home / "hooks.json").unlink()
            turn()
            assert (work / "marker.txt").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
