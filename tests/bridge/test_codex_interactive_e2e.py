"""What the real Codex TUI (pinned in agent-clis.txt, checked with 0.171.0) does
with a ``PermissionRequest`` hook, in a real terminal (tmux): it runs the hook
*before* its approval dialog and shows the dialog only when the hook gives no
decision. There is no race between the terminal and a remote answer, so
``install-hook codex --interactive`` is refused and Codex keeps its tool gate
(docs/platforms.md, "Interactive sessions")."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.agent_clis import REPO, require
from tests.bridge.tmux import Terminal
from tests.fakes.responses_server import ResponsesServer
from tests.fakes.scripted_http import Reply, Seen, shell_call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

DIALOG = "Would you like to run the following command?"
COMMAND = "touch marker-file && echo MADE"

# The hook: records its stdin, then blocks on a FIFO until the test says what
# to answer ("allow", or anything else for no decision).
HOOK = """import json, os, sys
data = sys.stdin.read()
open(os.environ["SEEN"], "w").write(data)
with open(os.environ["FIFO"]) as fifo:
    answer = fifo.readline().strip()
if answer == "allow":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                             "decision": {"behavior": "allow"}}}))
"""


def escalated_shell(seen: Seen) -> Reply:
    """The model asks to run COMMAND outside the sandbox, so Codex must approve it."""
    if seen.tool_results:
        return Reply(text="DONE [tool said: " + " | ".join(seen.tool_results) + "]")
    call = shell_call(seen.tools, COMMAND)
    if call is None:  # a request that offers no tools (not the turn itself)
        return Reply(text="ok")
    name, args = call
    args.update(sandbox_permissions="require_escalated", justification="write the marker file")
    return Reply(tool=(name, args))


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    # CODEX_HOME stays out of /tmp (tests/bridge/test_codex_e2e.py says why).
    home = REPO / ".cache" / "test-state" / f"codex-interactive-{tmp_path.name}"
    home.mkdir(parents=True)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("answer", ["nothing", "allow"])
async def test_the_permission_request_hook_runs_before_the_dialog(
    place: Path, tmp_path: Path, answer: str
) -> None:
    codex = require("@openai/codex")
    work = place / "work"
    work.mkdir()
    fifo, seen = place / "answer.fifo", place / "seen.json"
    os.mkfifo(fifo)
    (place / "hook.py").write_text(HOOK)
    hook = f"SEEN={seen} FIFO={fifo} {sys.executable} {place / 'hook.py'}"
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": hook, "timeout": 600}]}
    (place / "hooks.json").write_text(json.dumps({"hooks": {"PermissionRequest": [entry]}}))
    terminal = Terminal(tmp_path / "tmux.sock")
    with ResponsesServer(escalated_shell) as model:
        (place / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\napproval_policy = "on-request"\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{model.url}/v1"\n'
            'wire_api = "responses"\nenv_key = "FAKE_API_KEY"\nrequest_max_retries = 0\n'
            f'stream_max_retries = 0\n[projects."{work}"]\ntrust_level = "trusted"\n'
        )
        node = Path(shutil.which("node") or "/usr/bin/node").parent
        env = {"PATH": f"{node}:/usr/bin:/bin", "HOME": str(place), "CODEX_HOME": str(place),
               "FAKE_API_KEY": "dummy", "TERM": "xterm-256color"}  # fmt: skip
        argv = [str(codex), "--dangerously-bypass-hook-trust", "-s", "read-only", "make it"]
        try:
            terminal.start(argv, work, env)
            # The hook is waiting: Codex says so, and its dialog is not up.
            screen = await terminal.wait_for("Running hook", deadline=120)
            assert DIALOG not in screen
            data = json.loads(seen.read_text())
            assert data["hook_event_name"] == "PermissionRequest" and data["tool_name"] == "Bash"
            assert data["tool_input"] == {
                "command": COMMAND,
                "description": "write the marker file",
            }
            assert data["session_id"] and "tool_use_id" not in data
            fifo.write_text(answer + "\n")  # the hook is reading it: this does not block
            if answer == "allow":
                screen = await terminal.wait_for("DONE [tool said", deadline=60)
                assert DIALOG not in screen and "Ran touch marker-file" in screen  # never asked
            else:
                await terminal.wait_for(DIALOG, deadline=60)  # only now, after the hook
                assert not (work / "marker-file").exists()
                await terminal.answer("y", DIALOG, "DONE [tool said")
            assert (work / "marker-file").exists()
        finally:
            terminal.close()
