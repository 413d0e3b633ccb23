"""Claude Code runner (``--runner claude-code``), checked against Claude Code 2.1.197.

One turn::

    claude -p --output-format stream-json --verbose --permission-mode MODE
           --settings TURN/settings.json --mcp-config TURN/mcp.json [--resume ID]
           [--model M]                       (prompt on stdin)

- The mode flag is passed on every turn, resumed ones too: ``plan`` → Claude's
  own ``plan`` mode; ``workspace`` and ``full`` → ``default``, where the
  PreToolUse hook decides (the gateway answers "allowed" for ``full`` without
  asking anyone). The hook is kept in plan mode as well: a hook's "allow"
  overrides Claude's plan mode (seen with 2.1.197), and ours denies there.
- ``--settings`` injects the PreToolUse hook (``agentmail hook claude-code``)
  for this run only; it reads AGENTMAIL_SESSION_ID/URL/KEY from the environment.
- ``--mcp-config`` gives the model the agentmail mail tools for the turn: a
  project ``.mcp.json`` stays "pending approval" in ``-p`` mode and offers nothing.
- The exit code is 0 even when a tool was denied: denials are read from the
  stream (``result.permission_denials``). API failures end with a ``result``
  whose ``is_error`` is true and ``api_error_status`` is the HTTP status.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
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
from mailui4agents.domain.modes import Enforcement, Mode

logger = logging.getLogger(__name__)

PERMISSION_MODE: dict[Mode, str] = {"plan": "plan", "workspace": "default", "full": "default"}
#: Mail tools whose success means "the model answered by itself".
SENDING_TOOLS = frozenset({"mcp__agentmail__send_mail", "mcp__agentmail__forward_mail"})
HEAD_BYTES = 64 * 1024
MCP_ENV = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_AGENT", "AGENTMAIL_SESSION_ID")


def agentmail_command(*args: str) -> list[str]:
    """This installation's own ``agentmail``, whatever PATH the CLI gets."""
    return [sys.executable, "-m", "mailui4agents.cli.main", *args]


class ClaudeParser(StreamParser):
    """``--output-format stream-json --verbose`` lines into turn events."""

    def __init__(self) -> None:
        self.tool_names: dict[str, str] = {}
        self.session_id: str | None = None

    def feed(self, line: str) -> list[TurnEvent]:
        record = json_object(line)
        if record is None:
            return []
        events: list[TurnEvent] = []
        sid = record.get("session_id")
        if isinstance(sid, str) and sid and sid != self.session_id:
            self.session_id = sid
            events.append(SessionStarted(sid))
        kind = record.get("type")
        if kind == "assistant":
            for block in _content(record):
                if block.get("type") == "tool_use":
                    self.tool_names[str(block.get("id"))] = str(block.get("name"))
        elif kind == "user":
            for block in _content(record):
                if block.get("type") == "tool_result" and not block.get("is_error"):
                    name = self.tool_names.get(str(block.get("tool_use_id")), "")
                    if name in SENDING_TOOLS:
                        events.append(MailSent(name))
        elif kind == "result":
            events += self._result(record)
        return events

    def _result(self, record: dict[str, Any]) -> list[TurnEvent]:
        events: list[TurnEvent] = []
        for denial in record.get("permission_denials") or []:
            if isinstance(denial, dict):
                events.append(Denied(str(denial.get("tool_name")), "denied"))
        text = record.get("result")
        if record.get("is_error"):
            status = record.get("api_error_status")
            where = f"API error {status}: " if status else ""
            what = text if isinstance(text, str) and text else record.get("subtype") or "error"
            events.append(TurnError(f"{where}{what}"))
        elif isinstance(text, str):
            events.append(FinalText(text))
        return events


def _content(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


class ClaudeCodeRunner(BinaryRunner):
    """Headless Claude Code turns."""

    name = "claude-code"
    platform = "claude-code"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("claude") or "claude"
        self.model = options.pop("model", "") or None
        self.home = Path(options.pop("home", "") or os.environ.get("HOME") or Path.home())
        reject_unknown("claude-code", options, "bin=, model=, home=")

    def enforcement(self, mode: Mode) -> Enforcement:
        # plan: Claude's own plan mode plus the hook; workspace: Claude obeys the
        # hook's deny (both checked end to end against the real CLI).
        return "native"

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """Claude Code's own state: ~/.claude (or $CLAUDE_CONFIG_DIR: sessions, todos,
        shell snapshots) and its MCP logs in ~/.cache/claude-cli-nodejs. It replaces
        ~/.claude.json through a temporary file beside it, in the home folder, which
        stays read-only: those writes fail and Claude Code carries on
        (docs/sandbox.md, "State folders of each runner")."""
        home = Path(env.get("HOME") or self.home)
        state = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        logs = home / ".cache" / "claude-cli-nodejs"
        for folder in (state, logs):
            folder.mkdir(parents=True, exist_ok=True)
        return [str(state), str(logs), str(home / ".claude.json")]

    def missing(self) -> str | None:
        path = shutil.which(self.binary)
        if path is None:
            return f"the Claude Code CLI ({self.binary}) was not found"
        return None

    def launch(self, ctx: TurnContext) -> Launch:
        settings = ctx.turn_dir / "settings.json"
        mcp = ctx.turn_dir / "mcp.json"
        hook = " ".join(_quote(a) for a in agentmail_command("hook", "claude-code"))
        _write_private(
            settings,
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "*",
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": hook,
                                    "timeout": int(ctx.hook_timeout_s) + HOOK_MARGIN_S,
                                }
                            ],
                        }
                    ]
                }
            },
        )
        server_env = {
            name: ctx.base_env[name]
            for name in (
                "AGENTMAIL_URL",
                "AGENTMAIL_KEY",
                "AGENTMAIL_AGENT",
                "AGENTMAIL_SESSION_ID",
            )
            if name in ctx.base_env
        }
        command = agentmail_command("mcp")
        _write_private(
            mcp,
            {
                "mcpServers": {
                    "agentmail": {
                        "type": "stdio",
                        "command": command[0],
                        "args": command[1:],
                        "env": server_env,
                    }
                }
            },
        )
        argv = [
            self.binary, "-p", "--output-format", "stream-json", "--verbose",
            "--permission-mode", PERMISSION_MODE[ctx.mode],
            "--settings", str(settings), "--mcp-config", str(mcp),
        ]  # fmt: skip
        if ctx.platform_session_id:
            argv += ["--resume", ctx.platform_session_id]
        if self.model:
            argv += ["--model", self.model]
        return Launch(argv, dict(ctx.base_env), ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return ClaudeParser()

    def describe_defaults(self) -> str:
        model = (
            f"model {self.model} (from --runner-arg model=)"
            if self.model
            else "model: Claude Code's own default (its settings or ANTHROPIC_MODEL on this host)"
        )
        return f"runner claude-code: {self.binary}; {model}"

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """Claude Code's own sessions, newest first, from its session store
        ``~/.claude/projects/<cwd-slug>/<id>.jsonl``."""
        return recent_files(self.home / ".claude" / "projects", "*/*.jsonl", _session_info)


def _session_info(path: Path) -> dict[str, Any] | None:
    """``{platform_id, slug, title, cwd, updated_at}`` from a transcript's first lines."""
    from datetime import UTC, datetime

    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
        updated = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None
    cwd, title = "", ""
    for raw in head.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        cwd = cwd or str(record.get("cwd") or "")
        if record.get("type") == "summary" and record.get("summary"):
            title = str(record["summary"])
        if not title and record.get("type") == "user":
            title = _first_text(record)
        if cwd and title:
            break
    if not cwd:
        return None
    return platform_session(
        path.stem,
        title,
        cwd,
        updated,
        default_title=path.stem,
        default_slug=f"claude-{path.stem[:8]}",
    )


def _first_text(record: dict[str, Any]) -> str:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text") or "")
    return ""


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _write_private(path: Path, data: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
