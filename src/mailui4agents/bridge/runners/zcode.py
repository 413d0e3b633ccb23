"""ZCode runner (``--runner zcode``): built from ZCode's documented contract only
(docs/platforms.md, "ZCode"); no ZCode binary could be obtained to check it.

The contract it follows:

- One headless turn: ``zcode -p PROMPT --mode plan|edit|yolo [--resume sess_…]
  [--model M]``, cwd = the workspace. ZCode prints one JSON object at the end:
  ``{"sessionId": "sess_…", "response": "...", ...}`` (the last JSON object of
  stdout is taken: warnings may come first). A failure exits non-zero.
- Approvals: ZCode runs its user hooks (``hooks.events`` in
  ``~/.zcode/cli/config.json``) before each tool call; ``agentmail hook zcode``
  answers exactly ``{"decision":"approve"}`` or ``{"decision":"block",...}``. The
  hook is not injected per turn (ZCode takes no settings flag): ``agentmail
  install-hook zcode`` puts it in that file, and the runner refuses to start a
  turn while it is missing there (fail closed). The hook reads the bridge's
  ``AGENTMAIL_SESSION_ID`` from its environment and ``ZCODE_SESSION_ID`` from ZCode.
- Modes: ``plan`` → ZCode's ``plan`` (reads only) and the hook denies;
  ``workspace`` → ``edit``, where the hook asks a human; ``full`` → ``yolo``
  (the hook still runs and the gateway allows without asking).

Reported enforcement is ``partial``: native by the contract, but unverified
against the real binary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mailui4agents.bridge.runners.base import (
    BinaryRunner,
    FinalText,
    Launch,
    SessionStarted,
    StreamParser,
    TurnContext,
    TurnError,
    TurnEvent,
    reject_unknown,
)
from mailui4agents.domain.modes import Enforcement, Mode

MODE: dict[Mode, str] = {"plan": "plan", "workspace": "edit", "full": "yolo"}
HOOK = re.compile(r"(?:agentmail(?:\.exe)?['\"]?|mailui4agents\.cli\.main)\s+hook\s+zcode(?:\s|$)")
MAX_PROMPT_BYTES = 120 * 1024  # one argv string (Linux caps a single argument at 128 KiB)


def config_path(home: Path) -> Path:
    return home / ".zcode" / "cli" / "config.json"


def hook_installed(path: Path) -> bool:
    """Whether ZCode's config runs ``agentmail hook zcode`` before tool use."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    events = ((config.get("hooks") or {}) if isinstance(config, dict) else {}).get("events")
    groups = events.get("PreToolUse") if isinstance(events, dict) else None
    for group in groups if isinstance(groups, list) else []:
        for handler in (group.get("hooks") if isinstance(group, dict) else None) or []:
            command = handler.get("command") if isinstance(handler, dict) else None
            if isinstance(command, str) and HOOK.search(command):
                return True
    return False


class ZcodeParser(StreamParser):
    """ZCode's one JSON object, at the end of stdout."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def feed(self, line: str) -> list[TurnEvent]:
        self.lines.append(line)
        return []

    def finish(self) -> list[TurnEvent]:
        result = last_json_object("\n".join(self.lines))
        if result is None:
            return []
        events: list[TurnEvent] = []
        sid = result.get("sessionId")
        if isinstance(sid, str) and sid:
            events.append(SessionStarted(sid))
        if result.get("error"):
            events.append(TurnError(str(result["error"])))
        elif isinstance(result.get("response"), str):
            events.append(FinalText(result["response"]))
        return events


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a whole JSON object (or all of it)."""
    for candidate in [text, *reversed(text.splitlines())]:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


class ZcodeRunner(BinaryRunner):
    name = "zcode"
    platform = "zcode"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("zcode") or "zcode"
        self.model = options.pop("model", "") or None
        self.home = Path(options.pop("home", "") or os.environ.get("HOME") or Path.home())
        reject_unknown("zcode", options, "bin=, model=, home=")

    def enforcement(self, mode: Mode) -> Enforcement:
        return "partial"  # native by ZCode's contract; not checked against the real binary

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the ZCode CLI ({self.binary}) was not found"
        if not hook_installed(config_path(self.home)):
            return (
                f"the agentmail hook is not in {config_path(self.home)}: run "
                "`agentmail install-hook zcode` (no turn runs without it)"
            )
        return None

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """ZCode's ~/.zcode (its documented contract: config, sessions)."""
        state = self.home / ".zcode"
        state.mkdir(parents=True, exist_ok=True)
        return [str(state)]

    def launch(self, ctx: TurnContext) -> Launch:
        prompt = ctx.prompt
        if len(prompt.encode("utf-8")) > MAX_PROMPT_BYTES:
            cut = prompt.encode("utf-8")[:MAX_PROMPT_BYTES].decode("utf-8", "ignore")
            prompt = cut + "\n\n[mail cut: too long for one command-line argument]"
        argv = [self.binary, "-p", prompt, "--mode", MODE[ctx.mode]]
        if ctx.platform_session_id:
            argv += ["--resume", ctx.platform_session_id]
        if self.model:
            argv += ["--model", self.model]
        return Launch(argv, dict(ctx.base_env))

    def parser(self) -> StreamParser:
        return ZcodeParser()

    def describe_defaults(self) -> str:
        model = f"model {self.model}" if self.model else "model: ZCode's own default"
        return f"runner zcode: {self.binary}; {model}; verified against ZCode's contract only"
