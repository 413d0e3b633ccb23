"""ACP runner (``--runner acp -- CMD ARGS...``): any agent that speaks the Agent
Client Protocol over stdio (docs/platforms.md, "ACP"); proven with ``opencode acp``.

Each turn runs :mod:`mailui4agents.bridge.drivers.acp` with the agent's command
line; the driver starts the agent, creates (``session/new``) or resumes
(``session/load``) the platform session, prompts, and answers every
``session/request_permission`` from the gateway's decision.

Enforcement is ``partial`` by default: the bridge answers every permission the
agent asks for (fail closed), but whether an agent asks before each tool that
changes the machine is that agent's own configuration (``opencode acp``, say,
asks only for tools its config marks ``ask``). ``--runner-arg enforcement=native``
records that you checked it; ``platform=NAME`` names the agent in the heartbeat.
"""

from __future__ import annotations

import os
import shutil
import sys

from mailui4agents.bridge.drivers.protocol import DriverParser
from mailui4agents.bridge.runners.base import (
    Launch,
    Runner,
    StreamParser,
    TurnContext,
    reject_unknown,
)
from mailui4agents.domain.modes import Enforcement, Mode, normalise_enforcement


class AcpRunner(Runner):
    name = "acp"

    def __init__(self, argv: list[str], options: dict[str, str] | None = None) -> None:
        if not argv:
            raise ValueError(
                "the acp runner needs the agent's command after --, e.g. -- opencode acp"
            )
        options = dict(options or {})
        self.argv = list(argv)
        self.platform = options.pop("platform", "") or f"acp:{os.path.basename(argv[0])}"
        self._enforcement = normalise_enforcement(options.pop("enforcement", "partial"))
        self._version = options.pop("version", None)
        reject_unknown("the acp runner", options, "platform=, enforcement=, version=")

    def enforcement(self, mode: Mode) -> Enforcement:
        return self._enforcement

    def missing(self) -> str | None:
        program = self.argv[0]
        if os.sep in program:
            if os.path.isfile(program) and os.access(program, os.X_OK):
                return None
            return f"{program} does not exist or is not executable"
        if shutil.which(program) is None:
            return f"{program} was not found on PATH"
        return None

    def version(self) -> str | None:
        return self._version

    def launch(self, ctx: TurnContext) -> Launch:
        env = dict(ctx.base_env)
        env["AGENTMAIL_ACP_PLATFORM"] = self.platform
        argv = [sys.executable, "-m", "mailui4agents.bridge.drivers.acp", *self.argv]
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return DriverParser()

    def describe_defaults(self) -> str:
        return (
            f"runner acp: {' '.join(self.argv)} over the Agent Client Protocol; "
            f"enforcement {self._enforcement} (the agent's own config decides what it asks)"
        )
