"""A real terminal for interactive agent CLIs: tmux from Debian, driven with
``send-keys`` and read with ``capture-pane`` (scripts/install-test-deps.sh
installs it; a missing tmux fails under CI=true through tests/needs.missing)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

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

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)
