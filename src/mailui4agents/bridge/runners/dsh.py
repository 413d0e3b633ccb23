"""DSH runner (``--runner dsh``): DeepSeek Harness as an ACP agent, checked against
``@deepseek-ai/dsh`` 0.1.0-rc.8 with ``@deepseek-ai/dsh-acp`` 0.0.1-rc.1
(docs/platforms.md, "DSH").

Each turn runs :mod:`mailui4agents.bridge.drivers.acp` with ``dsh --profile acp``;
the profile (``$DSH_HOME/profiles/acp``) is written by ``agentmail install-hook dsh``
and loads the agentmail plugin (``assets/dsh-agentmail.mjs``).

- Modes: ``plan`` → ``DSH_PERMISSION_MODE=read-only`` (DSH refuses writes itself; a
  retry that asks for more is denied by the gateway in plan); ``workspace`` →
  ``workspace-write`` (DSH confines writes to the workspace with Landlock) and the
  plugin makes DSH ask before every tool that is not read-only, so each one is
  asked of a human by mail; ``full`` → ``danger-full-access`` (DSH never asks).
- DSH's permission request carries only the tool call's id: the request mail shows
  what the agent said before asking and says that DSH gave no details.
- DSH cannot resume a session over ACP (``session/load`` is "Method not found"):
  every turn is a new DSH session, and a later mail's prompt carries the mail
  session's thread so far (:attr:`Runner.resumes` is False).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from mailui4agents.bridge.drivers.protocol import DriverParser
from mailui4agents.bridge.runners.base import (
    Launch,
    Runner,
    StreamParser,
    TurnContext,
    reject_unknown,
)
from mailui4agents.domain.modes import Enforcement, Mode

PLUGIN = "agentmail.mjs"
PROFILE = "acp"
PERMISSION_MODES: dict[Mode, str] = {
    "plan": "read-only",
    "workspace": "workspace-write",
    "full": "danger-full-access",
}


def dsh_home(explicit: str | None = None) -> Path:
    """``DSH_HOME``, else ``~/.dsh``."""
    raw = explicit or os.environ.get("DSH_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".dsh"


def profile_dir(home: Path) -> Path:
    return home / "profiles" / PROFILE


class DshRunner(Runner):
    name = "dsh"
    platform = "dsh"
    resumes = False

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("dsh") or "dsh"
        self.home = dsh_home(options.pop("home", "") or None)
        self._version = options.pop("version", None)
        reject_unknown("dsh", options, "bin=, home=, version=")

    def enforcement(self, mode: Mode) -> Enforcement:
        # plan: DSH's read-only sandbox refuses writes (checked end to end). workspace:
        # the plugin asks before each tool it does not know as read-only, and Landlock
        # keeps writes in the workspace, but the request carries no tool details.
        return "native" if mode == "plan" else "partial"

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the dsh CLI ({self.binary}) was not found"
        if not (profile_dir(self.home) / PLUGIN).is_file():
            return (
                f"the agentmail profile for dsh is missing in {profile_dir(self.home)}: "
                "run `agentmail install-hook dsh`"
            )
        return None

    def version(self) -> str | None:
        return self._version

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """DSH keeps its sessions and profiles in DSH_HOME (~/.dsh)."""
        self.home.mkdir(parents=True, exist_ok=True)
        return [str(self.home)]

    def launch(self, ctx: TurnContext) -> Launch:
        env = dict(ctx.base_env)
        env["AGENTMAIL_ACP_PLATFORM"] = "dsh"
        env["AGENTMAIL_PLATFORM_SESSION_ID"] = ""  # no session/load over ACP
        env["DSH_HOME"] = str(self.home)
        env["DSH_PERMISSION_MODE"] = PERMISSION_MODES[ctx.mode]
        argv = [sys.executable, "-m", "mailui4agents.bridge.drivers.acp",
                self.binary, "--profile", PROFILE]  # fmt: skip
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return DriverParser()

    def describe_defaults(self) -> str:
        return (
            f"runner dsh: {self.binary} --profile {PROFILE} over the Agent Client Protocol, "
            f"DSH_HOME {self.home}; no resume (each mail: a new DSH session with the thread)"
        )
