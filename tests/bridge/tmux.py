"""A real terminal for interactive agent CLIs: tmux from Debian, driven with
``send-keys`` and read with ``capture-pane`` (scripts/install-test-deps.sh
installs it; a missing tmux fails under CI=true through tests/needs.missing)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from tests.needs import missing


class Terminal:
    """One detached tmux session of its own server socket (no user's tmux is touched)."""

    def __init__(self, socket: Path) -> None:
        if shutil.which("tmux") is None:
            missing("tmux is not installed (scripts/install-test-deps.sh installs it)")
        self.socket = socket
        self.name = f"t{uuid.uuid4().hex[:8]}"

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def start(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        """Run ``argv`` in a 200x50 terminal, in ``cwd``, with exactly ``env``."""
        command = "exec env -i " + " ".join(
            [*(shlex.quote(f"{k}={v}") for k, v in env.items()), *map(shlex.quote, argv)]
        )
        subprocess.run(
            ["tmux", "-S", str(self.socket), "new-session", "-d", "-s", self.name,
             "-x", "200", "-y", "50", "-c", str(cwd), command],
            check=True, timeout=30,
        )  # fmt: skip

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    async def wait_for(self, text: str, deadline: float = 90.0) -> str:
        """The screen once it shows ``text``; fails with the screen after ``deadline`` s.
        A terminal has no event to wait on, so this reads the screen every 50 ms."""
        screen = ""
        with anyio.move_on_after(deadline):
            while True:
                screen = self.screen()
                if text in screen:
                    return screen
                await anyio.sleep(0.05)
        raise AssertionError(f"{text!r} not on screen after {deadline} s:\n{screen}")

    async def answer(self, key: str, prompt: str, then: str, deadline: float = 60.0) -> str:
        """Press `key` to answer the dialog showing `prompt`, and return the screen
        once it shows `then`. A dialog may be drawn a moment before it takes keys
        (a Codex approval once kept its dialog up for 60 s after an early key):
        the key is pressed again, every 2 s, while `prompt` is still on screen."""
        screen = ""
        with anyio.move_on_after(deadline):
            while True:
                self.keys(key)
                with anyio.move_on_after(2.0):
                    while True:
                        screen = self.screen()
                        if then in screen:
                            return screen
                        if prompt not in screen:
                            break  # answered: wait for `then` without pressing again
                        await anyio.sleep(0.05)
                if prompt not in screen:
                    return await self.wait_for(then, deadline)
        raise AssertionError(f"{then!r} not on screen after {deadline} s:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)


REPO = Path(__file__).resolve().parents[2]


def claude_in_terminal(
    terminal: Terminal,
    claude_bin: Path,
    work: Path,
    home: Path,
    model_url: str,
    prompt: str,
    env: Mapping[str, str],
    claude_json: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Real Claude Code in ``terminal``, in ``work``, with the interactive hooks that
    ``agentmail install-hook claude-code --interactive`` writes, asked ``prompt``.
    ``env`` (the gateway's URL and key, an owner ...) is added to the CLI's; the
    environment without the model's is returned (for agentmail commands)."""
    home.mkdir(exist_ok=True)
    # No start-up dialogs: onboarding done, the key approved, the folder trusted.
    settings = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": ["dummy"], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True}},
        **(claude_json or {}),
    }
    (home / ".claude.json").write_text(json.dumps(settings))
    base = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(REPO / "src"),
        "TERM": "xterm-256color",
        **env,
    }
    install = [sys.executable, "-m", "mailui4agents.cli.main", "install-hook", "claude-code",
               "--interactive", "--project", str(work)]  # fmt: skip
    subprocess.run(install, check=True, capture_output=True, env=base, timeout=60)
    terminal.start(
        [str(claude_bin), "--permission-mode", "default", prompt],
        work,
        {
            **base,
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "dummy",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        },
    )
    return base
