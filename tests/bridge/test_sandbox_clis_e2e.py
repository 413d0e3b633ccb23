"""The turn sandbox with the real agent CLIs (docs/sandbox.md): a real gateway, a
real bridge with its default --sandbox, the real CLI at its pinned version, our
scripted model on 127.0.0.1.

The model asks for one shell command that writes inside the workspace, then
outside it (its error kept in a file of the workspace), then into a protected
path. In workspace mode nobody is asked, the inside write lands, the kernel
refuses the other two, and the turn goes on to its answer.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import needs
from tests.bridge.agent_clis import REPO, require
from tests.bridge.harness import Agent, BridgeProcess, Human
from tests.bridge.real_cli import codex_bridge
from tests.bridge.test_pi_e2e import pi_home
from tests.fakes.gemini_server import GeminiServer
from tests.fakes.model_server import ModelServer, bash_then_answer
from tests.fakes.openai_chat import ChatServer
from tests.fakes.openai_chat import answer as chat_answer
from tests.fakes.openai_chat import shell_then_answer as chat_shell_then_answer
from tests.fakes.responses_server import ResponsesServer
from tests.fakes.scripted_http import answer, shell_then_answer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]
TURN_S = 180.0


@pytest.fixture(autouse=True)
def bwrap() -> None:
    if shutil.which("bwrap") is None:
        needs.missing(
            "bubblewrap missing: scripts/install-test-deps.sh (apt-get install bubblewrap)"
        )


def command(outside: Path, settings: Path) -> str:
    return (
        "echo in > inside.txt; "
        f"(echo out > {outside}/out.txt) 2> outside-error.txt; "
        f"(d=.cl; echo '{{}}' > {settings.parent.parent}/${{d}}aude/{settings.name}) "
        "2> protected-error.txt; true"
    )


def kernel_refused(path: Path) -> bool:
    said = path.read_text()
    return "Read-only file system" in said or "Permission denied" in said


async def check_workspace_turn(human: Human, agent: Agent, script: Callable[[str], None]) -> None:
    """``script(command)``: the model asks for the shell command, then answers DONE."""
    outside = agent.workspace.parent / "outside"
    outside.mkdir(exist_ok=True)
    # A protected path inside the workspace (hook settings of any project), spelt so
    # that the hook's own text scan does not catch it first: only the kernel can.
    settings = agent.workspace / ".claude" / "settings.local.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text('{"keep": true}')
    script(command(outside, settings))
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "write the files",
                            mode="workspace")  # fmt: skip
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert await human.all_permissions(sent["session_id"]) == []  # nobody was asked
    inside = agent.workspace / "inside.txt"
    assert inside.exists() and inside.read_text() == "in\n", reply["body"]
    assert not (outside / "out.txt").exists()
    assert kernel_refused(agent.workspace / "outside-error.txt")
    assert settings.read_text() == '{"keep": true}'
    assert kernel_refused(agent.workspace / "protected-error.txt")
    assert reply["body"].startswith("DONE")  # the turn went on to its answer


# -- Claude Code ---------------------------------------------------------------------------


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(bash_then_answer("true", "DONE")) as server:
        yield server


def start_claude(agent: Agent, model: ModelServer, *args: str) -> BridgeProcess:
    claude_bin = require("@anthropic-ai/claude-code")
    home = agent.workspace.parent / "home"
    home.mkdir(exist_ok=True)
    return agent.bridge(
        "--runner-arg", f"bin={claude_bin}", "--runner-arg", f"home={home}", *args,
        runner="claude-code", sandbox=True,
        HOME=str(home),
        ANTHROPIC_BASE_URL=model.url,
        ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )  # fmt: skip


async def test_claude_code_in_workspace_writes_inside_unasked_and_is_refused_outside(
    human: Human, agent: Agent, model: ModelServer
) -> None:
    start_claude(agent, model)

    def script(shell: str) -> None:
        model.script = bash_then_answer(shell, "DONE")

    await check_workspace_turn(human, agent, script)


async def test_claude_code_under_network_deny_reaches_its_model_and_not_another_port(
    human: Human, agent: Agent, model: ModelServer
) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(4)
        port = other.getsockname()[1]
        shell = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2> net-error.txt; echo tried > tried.txt"
        model.script = bash_then_answer(shell, "DONE")
        start_claude(agent, model, "--sandbox-network", "deny")
        sent = await human.send(f"{agent.name}@{agent.workspace}.new", "try the port",
                                mode="workspace")  # fmt: skip
        reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert reply["body"].startswith("DONE")  # the model's port and the gateway's: reachable
    assert (agent.workspace / "tried.txt").exists()
    assert "Permission denied" in (agent.workspace / "net-error.txt").read_text()


async def test_claude_code_in_full_writes_outside(
    human: Human, agent: Agent, model: ModelServer
) -> None:
    outside = agent.workspace.parent / "outside"
    outside.mkdir()
    model.script = bash_then_answer(f"echo out > {outside}/out.txt", "DONE")
    start_claude(agent, model)
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "write it", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"], TURN_S)
    assert (outside / "out.txt").read_text() == "out\n"
    assert reply["body"].startswith("DONE")
    assert json.loads((agent.state_dir / "sessions.json").read_text())  # Claude kept its state


# -- Codex ---------------------------------------------------------------------------------


@pytest.fixture
def responses() -> Iterator[ResponsesServer]:
    with ResponsesServer(answer("ok")) as server:
        yield server


def start_codex(agent: Agent, model: ResponsesServer, *args: str) -> BridgeProcess:
    codex_bin = require("@openai/codex")
    # Codex refuses to link its sandbox helper under a temporary dir: keep its
    # CODEX_HOME (in the bridge's state dir) out of /tmp, as test_codex_e2e.py does.
    agent.state_dir = REPO / ".cache" / "test-state" / agent.name
    return codex_bridge(agent, model.url, codex_bin, *args, sandbox=True)


@pytest.fixture
def repo_state(agent: Agent) -> Iterator[None]:
    yield
    shutil.rmtree(REPO / ".cache" / "test-state" / agent.name, ignore_errors=True)


async def test_codex_in_workspace_writes_inside_unasked_and_is_refused_outside(
    human: Human, agent: Agent, responses: ResponsesServer, repo_state: None
) -> None:
    start_codex(agent, responses, "--sandbox-network", "deny")  # its model's port stays open

    def script(shell: str) -> None:
        responses.script = shell_then_answer(shell, "DONE")

    await check_workspace_turn(human, agent, script)


# -- pi ------------------------------------------------------------------------------------


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer(chat_answer("ok")) as server:
        yield server


async def test_pi_in_workspace_writes_inside_unasked_and_is_refused_outside(
    human: Human, agent: Agent, chat: ChatServer
) -> None:
    pi_bin = require("@mariozechner/pi-coding-agent")
    home = pi_home(agent, chat)
    agent.bridge(
        "--runner-arg", f"bin={pi_bin}", "--runner-arg", "model=fake/fake-model",
        "--runner-arg", f"home={home}", runner="pi", sandbox=True, HOME=str(home),
        PI_OFFLINE="1",
    )  # fmt: skip

    def script(shell: str) -> None:
        chat.script = chat_shell_then_answer(shell, "DONE")

    await check_workspace_turn(human, agent, script)


# -- Gemini CLI ----------------------------------------------------------------------------


@pytest.fixture
def gemini() -> Iterator[GeminiServer]:
    with GeminiServer(answer("ok")) as server:
        yield server


async def test_gemini_in_workspace_writes_inside_unasked_and_is_refused_outside(
    human: Human, agent: Agent, gemini: GeminiServer, repo_state: None
) -> None:
    gemini_bin = require("@google/gemini-cli")
    home = agent.workspace.parent / "home"
    home.mkdir(exist_ok=True)
    # Gemini skips a settings file below a folder others may write to (/tmp).
    agent.state_dir = REPO / ".cache" / "test-state" / agent.name
    agent.bridge(
        "--runner-arg", f"bin={gemini_bin}", "--runner-arg", "model=gemini-fake",
        "--runner-arg", f"home={home}", runner="gemini", sandbox=True, HOME=str(home),
        GOOGLE_GEMINI_BASE_URL=gemini.url, GEMINI_API_KEY="dummy",
    )  # fmt: skip

    def script(shell: str) -> None:
        gemini.script = shell_then_answer(shell, "DONE")

    await check_workspace_turn(human, agent, script)


# -- DSH -----------------------------------------------------------------------------------


def install_dsh_profile(home: Path, modules: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "dsh",
         "--node-modules", str(modules)], check=True, env={**os.environ, "DSH_HOME": str(home)},
    )  # fmt: skip


async def test_dsh_in_workspace_writes_inside_unasked_and_is_refused_outside(
    human: Human, agent: Agent, chat: ChatServer
) -> None:
    dsh_bin = require("@deepseek-ai/dsh").resolve()
    home = agent.workspace.parent / "dsh-home"
    modules = dsh_bin.parent.parent / "profile" / "node_modules"
    install_dsh_profile(home, modules)
    agent.bridge(
        "--runner-arg", f"bin={dsh_bin}", "--runner-arg", f"home={home}", runner="dsh",
        sandbox=True, DEEPSEEK_BASE_URL=chat.url, DEEPSEEK_API_KEY="dummy",
        DSH_TELEMETRY_DISABLED="1",
    )  # fmt: skip

    def script(shell: str) -> None:
        chat.script = chat_shell_then_answer(shell, "DONE")

    await check_workspace_turn(human, agent, script)
