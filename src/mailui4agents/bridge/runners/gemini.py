"""Gemini CLI runner (``--runner gemini``), checked against Gemini CLI 0.61.0
(docs/platforms.md).

One turn (the prompt on stdin; ``-p ""`` makes the run headless)::

    GEMINI_CLI_SYSTEM_SETTINGS_PATH=TURN/settings.json GEMINI_CLI_NO_RELAUNCH=true
    gemini -p "" --output-format stream-json --skip-trust --approval-mode MODE
           [--policy TURN/policy.toml] [-m MODEL] [--resume UUID]

- The mode is explicit on every turn, resumed ones too: ``plan`` → Gemini's own
  ``--approval-mode plan`` (read-only tools only) and no policy; ``workspace``
  and ``full`` → ``default`` plus a policy that exposes the shell and edit
  tools (headless Gemini leaves them out of the model's tools otherwise; the
  shell rule needs ``allowRedirection``), and the BeforeTool hook decides:
  ``agentmail hook gemini`` asks the gateway (which answers "allowed" in
  ``full`` without asking anyone).
- The run's settings are Gemini's *system* settings file, one per turn in the
  turn dir, so the person's own ``~/.gemini/settings.json`` is never edited and
  their HOME (chats, login) is used: the hook (timeout in ms, above
  ``--hook-timeout``), the agentmail MCP server, and ``security.auth.selectedType``
  (``--runner-arg auth=``; ``gemini-api-key`` when GEMINI_API_KEY is set and
  none is given — with an API key alone Gemini 0.61 picks an auth type it then
  refuses headless, "Invalid auth method selected").
- ``-m`` (``--runner-arg model=``) skips Gemini's router call per turn.
- The exit code is 0 when a tool was denied: a denial is a ``tool_result``
  with ``status: error`` and ``error.type: policy_violation`` ("Tool execution
  blocked: REASON", the hook's reason, which reaches the model).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mailui4agents.bridge.runners.base import (
    HOOK_MARGIN_S,
    BinaryRunner,
    Denied,
    FinalText,
    Launch,
    MailSent,
    SessionStarted,
    StreamParser,
    TurnContext,
    TurnError,
    TurnEvent,
    json_object,
    platform_session,
    recent_files,
    reject_unknown,
)
from mailui4agents.bridge.runners.claude_code import agentmail_command
from mailui4agents.bridge.runners.codex import FAIL_CLOSED
from mailui4agents.domain.modes import Enforcement, Mode

logger = logging.getLogger(__name__)

APPROVAL_MODE: dict[Mode, str] = {"plan": "plan", "workspace": "default", "full": "default"}
#: Headless Gemini offers the model these only when a policy allows them; the hook
#: then decides each call.
EXPOSED = ("run_shell_command", "write_file", "replace")
SENDING_TOOLS = frozenset({"mcp_agentmail_send_mail", "mcp_agentmail_forward_mail"})
MCP_ENV = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_AGENT", "AGENTMAIL_SESSION_ID",
           "AGENTMAIL_SENT_LOG")  # fmt: skip
HEAD_BYTES = 64 * 1024


def policy_toml() -> str:
    rules = []
    for tool in EXPOSED:
        rule = f'[[rule]]\ntoolName = "{tool}"\ndecision = "allow"\npriority = 100\n'
        if tool == "run_shell_command":
            rule += "allowRedirection = true\n"
        rules.append(rule)
    return "\n".join(rules)


class GeminiParser(StreamParser):
    """``--output-format stream-json`` lines into turn events."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.text: list[str] = []
        self.tools: dict[str, str] = {}

    def feed(self, line: str) -> list[TurnEvent]:
        record = json_object(line)
        if record is None:
            return []
        kind = record.get("type")
        if kind == "init":
            sid = record.get("session_id")
            if isinstance(sid, str) and sid and sid != self.session_id:
                self.session_id = sid
                return [SessionStarted(sid)]
        elif kind == "message" and record.get("role") == "assistant":
            content = record.get("content")
            if isinstance(content, str):
                if not record.get("delta") and self.text:
                    self.text.append("\n")
                self.text.append(content)
                return [FinalText("".join(self.text))]
        elif kind == "tool_use":
            self.tools[str(record.get("tool_id"))] = str(record.get("tool_name") or "")
        elif kind == "tool_result":
            return self._tool_result(record)
        elif kind == "error" and record.get("severity") == "error":
            return [TurnError(str(record.get("message") or "Gemini CLI reported an error"))]
        elif kind == "result" and record.get("status") == "error":
            error = record.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            return [TurnError(str(message or "the Gemini turn failed"))]
        return []

    def _tool_result(self, record: dict[str, Any]) -> list[TurnEvent]:
        name = self.tools.get(str(record.get("tool_id")), "tool")
        error = record.get("error")
        if record.get("status") == "error" and isinstance(error, dict):
            if error.get("type") == "policy_violation":
                return [Denied(name, str(error.get("message") or record.get("output") or ""))]
            return []
        if record.get("status") == "success" and name in SENDING_TOOLS:
            return [MailSent(name)]
        return []


class GeminiRunner(BinaryRunner):
    """Headless Gemini CLI turns."""

    name = "gemini"
    version_timeout_s = 60
    platform = "gemini"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("gemini") or "gemini"
        self.model = options.pop("model", "") or None
        self.home = Path(options.pop("home", "") or os.environ.get("HOME") or Path.home())
        self.auth = options.pop("auth", "") or None
        reject_unknown("gemini", options, "bin=, model=, home=, auth=")

    def enforcement(self, mode: Mode) -> Enforcement:
        # plan: Gemini's own plan mode (no shell or edit tool is offered) plus the
        # hook; workspace: every call passes the BeforeTool hook and Gemini honours
        # its deny — the shell end to end with 0.61.0 (tests/bridge/test_gemini_e2e.py),
        # write_file by hand against the scripted server. There is no sandbox under
        # the hook, and a hook that Gemini kills on its timeout lets the tool run —
        # ours answers before its timeout.
        return "native"

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the Gemini CLI ({self.binary}) was not found"
        return None

    def version_env(self) -> dict[str, str] | None:
        return {**os.environ, "GEMINI_CLI_NO_RELAUNCH": "true"}

    def settings(self, ctx: TurnContext) -> dict[str, Any]:
        hook = " ".join(_quote(a) for a in agentmail_command("hook", "gemini")) + FAIL_CLOSED
        server = agentmail_command("mcp")
        settings: dict[str, Any] = {
            "hooksConfig": {"enabled": True},
            "hooks": {"BeforeTool": [{"matcher": "*", "hooks": [
                {"name": "agentmail", "type": "command", "command": hook,
                 "timeout": int(ctx.hook_timeout_s + HOOK_MARGIN_S) * 1000}]}]},
            "mcpServers": {"agentmail": {
                "command": server[0], "args": server[1:],
                "env": {n: ctx.base_env[n] for n in MCP_ENV if n in ctx.base_env}}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }  # fmt: skip
        auth = self.auth or ("gemini-api-key" if ctx.base_env.get("GEMINI_API_KEY") else None)
        if auth:
            settings["security"] = {"auth": {"selectedType": auth}}
        return settings

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """Gemini CLI's ~/.gemini (chats, logs, its tmp); its settings.json inside
        stays read-only (a protected path, docs/sandbox.md)."""
        state = self.home / ".gemini"
        state.mkdir(parents=True, exist_ok=True)
        return [str(state)]

    def launch(self, ctx: TurnContext) -> Launch:
        settings = ctx.turn_dir / "settings.json"
        unsafe = insecure_parent(ctx.turn_dir)
        if unsafe is not None:
            # Gemini would skip the settings (and so the hook) but still load the
            # policy that exposes the shell: never start it like that.
            why = (
                f"Gemini CLI skips a settings file under {unsafe}, which others may write "
                "to, so the approval hook would not run: give the bridge a --state-dir "
                "outside it (the default, under your home, is fine)"
            )
            return Launch([sys.executable, "-c", "import sys; sys.exit(sys.argv[1])", why],
                          dict(ctx.base_env))  # fmt: skip
        _write_private(settings, json.dumps(self.settings(ctx)))
        argv = [
            self.binary, "-p", "", "--output-format", "stream-json", "--skip-trust",
            "--approval-mode", APPROVAL_MODE[ctx.mode],
        ]  # fmt: skip
        if ctx.mode != "plan":
            policy = ctx.turn_dir / "policy.toml"
            _write_private(policy, policy_toml())
            argv += ["--policy", str(policy)]
        if self.model:
            argv += ["-m", self.model]
        if ctx.platform_session_id:
            argv += ["--resume", ctx.platform_session_id]
        env = dict(ctx.base_env)
        env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = str(settings)
        env["GEMINI_CLI_NO_RELAUNCH"] = "true"
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return GeminiParser()

    def describe_defaults(self) -> str:
        model = (
            f"model {self.model} (from --runner-arg model=)"
            if self.model
            else "model: Gemini's own default (its router picks one: one more call per turn)"
        )
        return f"runner gemini: {self.binary}; {model}; chats in {self.home}/.gemini"

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """Gemini's own chats, newest first: ``~/.gemini/tmp/<project>/chats/
        session-<ts>-<id8>.jsonl`` (the project's folder in ``<project>/.project_root``)."""
        root = self.home / ".gemini" / "tmp"
        return recent_files(root, "*/chats/session-*.jsonl", chat_info, by_name=True)


def insecure_parent(path: Path) -> Path | None:
    """The first folder above ``path`` that group or others may write to: Gemini
    CLI 0.61 refuses a system settings file below one ("Parent directory '/tmp' is
    insecure"), sticky bit or not."""
    for folder in [path, *path.parents]:
        try:
            mode = folder.stat().st_mode
        except OSError:
            return folder
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            return folder
    return None


def chat_info(path: Path) -> dict[str, Any] | None:
    """``{platform_id, slug, title, cwd, updated_at}`` from a chat file's first lines."""
    from datetime import UTC, datetime

    try:
        cwd = (path.parent.parent / ".project_root").read_text(encoding="utf-8").strip()
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
        updated = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None
    session_id, title = "", ""
    for raw in head.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if not session_id and isinstance(record.get("sessionId"), str):
            if record.get("kind", "main") != "main":
                return None  # a subagent's chat
            session_id = record["sessionId"]
        if record.get("type") == "user" and not title:
            for part in record.get("content") or []:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and text.strip() and not text.lstrip().startswith("<"):
                    title = text
                    break
        if session_id and title:
            break
    if not session_id or not cwd:
        return None
    return platform_session(
        session_id,
        title,
        cwd,
        updated,
        default_title=f"gemini {session_id[:8]}",
        default_slug=f"gemini-{session_id[:8]}",
    )


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
