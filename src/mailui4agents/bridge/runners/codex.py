"""Codex runner (``--runner codex``), checked against Codex 0.171.0 (docs/platforms.md).

One turn (the prompt on stdin, ``-``)::

    CODEX_HOME=STATE/codex-home codex exec --json --skip-git-repo-check
        --dangerously-bypass-hook-trust -c sandbox_mode="MODE_SANDBOX"
        -c hooks.PreToolUse=[…agentmail hook codex…] -c mcp_servers.agentmail…
        [-m MODEL] [resume THREAD_ID] -

- Approvals: ``codex exec`` never asks anyone (its approval policy is forced to
  ``never``), so every tool call goes through the PreToolUse hook
  ``agentmail hook codex``, which asks the gateway exactly like the Claude Code
  hook. Codex runs an untrusted hook only with ``--dangerously-bypass-hook-trust``.
  Why not ``codex app-server``: its ``requestApproval`` answer is only
  accept/decline, so a human's note never reaches the model (it is told
  ``Rejected("rejected by user")``), while a hook's deny reason does; and the
  hook keeps one approval path (parking, news, protected paths) for every
  platform. Both were tried with 0.171.0; docs/platforms.md has the evidence.
- The sandbox is explicit on every turn, resumed ones too (``resume`` takes no
  ``-s``, so it is ``-c sandbox_mode=``): ``plan`` → ``read-only``,
  ``workspace`` → ``workspace-write``, ``full`` → ``danger-full-access``.
- A per-bridge ``CODEX_HOME`` (``STATE/codex-home``): its ``config.toml`` is the
  person's Codex config (``--runner-arg config=FILE``, default
  ``$CODEX_HOME/config.toml`` or ``~/.codex/config.toml``: the provider and
  model) and ``auth.json`` is linked from there; everything the bridge needs is
  passed with ``-c`` per turn, so the person's file is never edited.
  ``--runner-arg home=DIR`` uses DIR itself (a person's own Codex home: then
  the sessions they started in a terminal can be adopted by mail).
- The exit code is 0 when a tool was denied, and a denied command leaves *no*
  ``command_execution`` item in the stream: denials are read from the
  thread's rollout file (``CODEX_HOME/sessions/…/rollout-…-THREAD.jsonl``), whose
  tool output says ``Command blocked by PreToolUse hook: …``. ``item.completed``
  items of type ``error`` ("Model metadata … not found", the hook-trust warning)
  are warnings, not failures; ``turn.failed`` and a top-level ``error`` are.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tomllib
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
from mailui4agents.bridge.sandbox import url_port
from mailui4agents.domain.modes import Enforcement, Mode

logger = logging.getLogger(__name__)

SANDBOX: dict[Mode, str] = {
    "plan": "read-only",
    "workspace": "workspace-write",
    "full": "danger-full-access",
}
#: Exit 2 blocks in Codex only with a reason on stderr (0.171.0): the wrapper
#: blocks even when the hook cannot start at all.
FAIL_CLOSED = " || { echo 'the agentmail hook could not run: blocked to be safe' >&2; exit 2; }"
BLOCKED = "Command blocked by PreToolUse hook:"
SENDING_TOOLS = frozenset({"send_mail", "forward_mail"})
MCP_ENV = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_AGENT", "AGENTMAIL_SESSION_ID",
           "AGENTMAIL_SENT_LOG")  # fmt: skip
HEAD_BYTES = 256 * 1024
#: Warnings Codex reports as ``error`` items although the turn goes on.
NOT_FATAL = re.compile(r"Model metadata for|dangerously-bypass-hook-trust|could not create PATH")


def toml_value(value: Any) -> str:
    """A TOML inline value for ``-c`` (JSON strings and arrays are valid TOML)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


class CodexParser(StreamParser):
    """``codex exec --json`` lines into turn events."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.thread_id: str | None = None
        self.final: str | None = None

    def feed(self, line: str) -> list[TurnEvent]:
        record = json_object(line)
        if record is None:
            return []
        kind = record.get("type")
        if kind == "thread.started":
            tid = record.get("thread_id")
            if isinstance(tid, str) and tid and tid != self.thread_id:
                self.thread_id = tid
                return [SessionStarted(tid)]
            return []
        if kind == "item.completed":
            return self._item(record.get("item"))
        if kind == "turn.failed":
            error = record.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            return [TurnError(str(message or "the Codex turn failed"))]
        if kind == "error":
            message = str(record.get("message") or "Codex reported an error")
            return [] if NOT_FATAL.search(message) else [TurnError(message)]
        return []

    def _item(self, item: Any) -> list[TurnEvent]:
        if not isinstance(item, dict):
            return []
        kind = item.get("type")
        if kind == "agent_message" and isinstance(item.get("text"), str):
            self.final = item["text"]
            return [FinalText(item["text"])]
        if kind == "command_execution" and item.get("status") == "declined":
            return [Denied("Bash", str(item.get("command") or "declined"))]
        sending = item.get("tool") in SENDING_TOOLS and item.get("status") == "completed"
        if kind == "mcp_tool_call" and item.get("server") == "agentmail" and sending:
            return [MailSent(str(item["tool"]))]
        return []

    def finish(self) -> list[TurnEvent]:
        """The turn's denials, from the rollout: the stream shows none."""
        if self.thread_id is None:
            return []
        return [Denied(tool, reason) for tool, reason in turn_denials(self.home, self.thread_id)]


def rollout_path(home: Path, thread_id: str) -> Path | None:
    try:
        found = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    except OSError:
        return None
    return found[-1] if found else None


def turn_denials(home: Path, thread_id: str) -> list[tuple[str, str]]:
    """``(tool, reason)`` for each call the hook blocked in the thread's last turn."""
    path = rollout_path(home, thread_id)
    if path is None:
        return []
    calls: dict[str, str] = {}
    denials: list[tuple[str, str]] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if record.get("type") == "event_msg" and kind == "task_started":
            calls, denials = {}, []  # a new turn: only the last one counts
        elif kind in ("function_call", "custom_tool_call"):
            calls[str(payload.get("call_id"))] = str(payload.get("name") or "")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = payload.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            if text.startswith(BLOCKED):
                reason = text[len(BLOCKED) :].strip()
                denials.append((calls.get(str(payload.get("call_id")), "tool"), reason))
    return denials


class CodexRunner(BinaryRunner):
    """Headless Codex turns (``codex exec --json``)."""

    name = "codex"
    platform = "codex"

    def __init__(self, options: dict[str, str] | None = None) -> None:
        options = dict(options or {})
        self.binary = options.pop("bin", "") or shutil.which("codex") or "codex"
        self.model = options.pop("model", "") or None
        own = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        home = options.pop("home", "")
        self.shared_home = Path(home) if home else None
        self.source_home = self.shared_home or own
        config = options.pop("config", "")
        self.config = Path(config) if config else self.source_home / "config.toml"
        reject_unknown("codex", options, "bin=, model=, home=, config=")
        self.home: Path | None = self.shared_home  # set on the first turn otherwise

    def enforcement(self, mode: Mode) -> Enforcement:
        """plan: ``native`` — Codex's read-only sandbox (kernel: Landlock/seccomp, or
        bubblewrap) plus the hook, which denies there. workspace: ``partial`` —
        every shell command passes the hook and Codex honours its deny, and the
        workspace-write sandbox keeps writes in the workspace (both checked end to
        end with 0.171.0), but file edits through ``apply_patch`` (offered to
        OpenAI's own models, not to a custom one) were not seen to pass the hook
        here: inside the workspace they may run unasked. full: nothing to block."""
        return "partial" if mode == "workspace" else "native"

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the Codex CLI ({self.binary}) was not found"
        return None

    def codex_home(self, state_dir: Path) -> Path:
        """The bridge's own CODEX_HOME, made on first use from the person's config."""
        if self.shared_home is not None:
            return self.shared_home
        home = state_dir / "codex-home"
        home.mkdir(mode=0o700, exist_ok=True)
        try:
            text = self.config.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        target = home / "config.toml"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        auth = self.source_home / "auth.json"
        link = home / "auth.json"
        if auth.exists() and not link.exists():
            link.symlink_to(auth.absolute())
        self.home = home
        return home

    def sandbox_writable(self, env: Mapping[str, str], state_dir: Path) -> list[str]:
        """Codex keeps everything in its CODEX_HOME (sessions, logs, its sandbox
        helper): the bridge's own in the state dir, or the shared ``home=``."""
        return [str(self.codex_home(state_dir))]

    def model_ports(self, env: Mapping[str, str]) -> list[int]:
        """The ports of the providers' ``base_url`` in the Codex config."""
        try:
            config = tomllib.loads(self.config.read_text())
        except (OSError, ValueError):
            return []
        providers = config.get("model_providers")
        ports = []
        for provider in providers.values() if isinstance(providers, dict) else []:
            url = provider.get("base_url") if isinstance(provider, dict) else None
            port = url_port(url) if isinstance(url, str) else None
            if port is not None:
                ports.append(port)
        return ports

    @staticmethod
    def sandbox_mode(ctx: TurnContext) -> str:
        """Codex's own sandbox per mode; inside the bridge's sandbox none: Codex
        builds a bubblewrap sandbox of its own, which cannot nest (Landlock refuses
        mounts; measured with 0.171.0: "error building bubblewrap command"), and the
        bridge's boundary already holds the mode (docs/sandbox.md)."""
        return "danger-full-access" if ctx.sandboxed else SANDBOX[ctx.mode]

    def launch(self, ctx: TurnContext) -> Launch:
        # The turn dir is STATE/turns/TOKEN (bridge/turn.py): the bridge's state is two up.
        home = self.codex_home(ctx.turn_dir.parent.parent)
        hook = " ".join(_quote(a) for a in agentmail_command("hook", "codex")) + FAIL_CLOSED
        hooks = [{"matcher": "*", "hooks": [
            {"type": "command", "command": hook,
             "timeout": int(ctx.hook_timeout_s) + HOOK_MARGIN_S}]}]  # fmt: skip
        server = agentmail_command("mcp")
        env_vars = [n for n in MCP_ENV if n in ctx.base_env]
        argv = [
            self.binary, "exec", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            "-c", f"sandbox_mode={toml_value(self.sandbox_mode(ctx))}",
            "-c", f"hooks.PreToolUse={toml_value(hooks)}",
            "-c", f"mcp_servers.agentmail.command={toml_value(server[0])}",
            "-c", f"mcp_servers.agentmail.args={toml_value(server[1:])}",
            "-c", f"mcp_servers.agentmail.env_vars={toml_value(env_vars)}",
        ]  # fmt: skip
        if self.model:
            argv += ["-m", self.model]
        if ctx.platform_session_id:
            argv += ["resume", ctx.platform_session_id]
        argv.append("-")
        env = dict(ctx.base_env)
        env["CODEX_HOME"] = str(home)
        return Launch(argv, env, ctx.prompt.encode("utf-8"))

    def parser(self) -> StreamParser:
        return CodexParser(self.home or self.source_home)

    def describe_defaults(self) -> str:
        model = (
            f"model {self.model} (from --runner-arg model=)"
            if self.model
            else f"model and provider from {self.config}"
        )
        where = (
            f"CODEX_HOME {self.shared_home} (shared)"
            if self.shared_home
            else "CODEX_HOME STATE/codex-home (the bridge's own)"
        )
        return f"runner codex: {self.binary}; {model}; {where}"

    def recent_sessions(self, workspaces: list[str]) -> list[dict[str, Any]]:
        """Codex's own sessions, newest first, from its rollouts
        ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl``."""
        home = self.home or self.source_home
        pattern = "*/*/*/rollout-*.jsonl"
        return recent_files(home / "sessions", pattern, rollout_info, by_name=True)


def rollout_info(path: Path) -> dict[str, Any] | None:
    """``{platform_id, slug, title, cwd, updated_at}`` from a rollout's first lines."""
    from datetime import UTC, datetime

    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
        updated = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None
    session_id, cwd, title = "", "", ""
    for raw in head.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if not isinstance(payload, dict):
            continue
        if record.get("type") == "session_meta":
            session_id = str(payload.get("id") or "")
            cwd = str(payload.get("cwd") or "")
        elif payload.get("type") == "message" and payload.get("role") == "user":
            for part in payload.get("content") or []:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and text.strip() and not text.lstrip().startswith("<"):
                    title = text
                    break
        if session_id and cwd and title:
            break
    if not session_id or not cwd:
        return None
    return platform_session(
        session_id,
        title,
        cwd,
        updated,
        default_title=f"codex {session_id[:8]}",
        default_slug=f"codex-{session_id[:8]}",
    )


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
