"""``agentmail install-mcp claude-code | codex | opencode | gemini``: register
``agentmail mcp`` as an MCP server of an agent platform.

Where each platform reads its MCP servers (``--project DIR`` / the user's own):

- Claude Code: ``DIR/.mcp.json`` / ``~/.claude.json``, key ``mcpServers.agentmail``.
- Codex: ``DIR/.codex/config.toml`` (trusted projects only) /
  ``$CODEX_HOME/config.toml`` (default ``~/.codex``), table ``[mcp_servers.agentmail]``.
- opencode: ``DIR/opencode.json`` / ``~/.config/opencode/opencode.json``, key ``mcp.agentmail``.
- Gemini CLI: ``DIR/.gemini/settings.json`` / ``~/.gemini/settings.json``,
  key ``mcpServers.agentmail``.

Timeouts: ``ask_human`` waits ``AGENTMAIL_ASK_TIMEOUT`` seconds (``--ask-timeout``,
default 50), which the entry sets; the platform's own tool timeout is set above it
(by a margin of 30 s or a fifth, whichever is larger) wherever the platform has
one below that: Codex ``tool_timeout_sec`` (default 60 s), Gemini ``timeout`` in ms
(default 600 s), opencode ``experimental.mcp_timeout`` in ms (only ever raised).
Claude Code's own MCP tool timeout is hours long (``MCP_TOOL_TIMEOUT``).

The environment the server needs (``AGENTMAIL_URL``, ``AGENTMAIL_KEY``,
``AGENTMAIL_AGENT``, ``AGENTMAIL_SESSION_ID``) is passed through from the agent's
own environment in each platform's syntax, never written as a value: a project
file is often committed, and a key must not be. Without them the server falls
back to the stored config (``connect_to_server`` writes it).

Files are merged, never replaced: other servers and settings stay as they are, an
earlier agentmail entry is replaced in place, a second run changes nothing, and
the new content is written atomically (see :mod:`mailui4agents.cli.install`).
Codex's TOML is edited as text — the standard library reads TOML but cannot
write it — and the result is checked by parsing it: everything but the
agentmail table must read back exactly as before, or nothing is written.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mailui4agents.cli import install
from mailui4agents.cli.common import fail

SERVER_KEY = "agentmail"
DEFAULT_ASK_TIMEOUT_S = 50  # as mailui4agents.mcp.runtime (not imported: it pulls in the SDK)
PASSED_THROUGH = ("AGENTMAIL_URL", "AGENTMAIL_KEY", "AGENTMAIL_AGENT", "AGENTMAIL_SESSION_ID")
GEMINI_DEFAULT_TIMEOUT_MS = 600_000
CODEX_STARTUP_TIMEOUT_S = 20
OPENCODE_STEP_LIMIT_S = 120  # reported: opencode ends any tool call after 120 s (its AI SDK step)


def client_timeout(ask_timeout_s: int) -> int:
    """The platform's tool timeout for a given ask timeout: 30 s or a fifth above it."""
    return ask_timeout_s + max(30, math.ceil(ask_timeout_s / 5))


@dataclass(frozen=True)
class Platform:
    name: str
    project_file: str  # relative to --project DIR
    user_file: Callable[[], Path]
    kind: str  # "json" or "toml"


def _home() -> Path:
    return Path.home()


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")


PLATFORMS = {
    p.name: p
    for p in (
        Platform("claude-code", ".mcp.json", lambda: _home() / ".claude.json", "json"),
        Platform(
            "codex",
            ".codex/config.toml",
            lambda: Path(os.environ.get("CODEX_HOME") or _home() / ".codex") / "config.toml",
            "toml",
        ),
        Platform(
            "opencode",
            "opencode.json",
            lambda: _xdg_config() / "opencode" / "opencode.json",
            "json",
        ),
        Platform(
            "gemini", ".gemini/settings.json", lambda: _home() / ".gemini/settings.json", "json"
        ),
        # ZCode: ``mcp.servers`` in its user config (its documented contract; unverified).
        Platform("zcode", "", lambda: _home() / ".zcode/cli/config.json", "json"),
    )
}
#: Platforms without an MCP client, and what to use instead.
NO_MCP = {
    "pi": "pi has no MCP client (by design); a pi agent reaches agentmail through the "
    "gate extension (`agentmail install-hook pi`) and the `agentmail` command in its bash tool",
}


def config_path_for(platform: Platform, project: str | None) -> Path:
    if project is not None and not platform.project_file:
        raise install.SettingsError(
            f"{platform.name} reads MCP servers from the user's config only; run without --project"
        )
    if project is None:
        return platform.user_file()
    return Path(project).expanduser().absolute() / platform.project_file


# -- the entries ------------------------------------------------------------------------------


def json_entry(platform: Platform, command: list[str], ask_timeout_s: int) -> dict[str, Any]:
    """The server entry of a JSON platform."""
    ask = str(ask_timeout_s)
    if platform.name == "claude-code":
        env = {name: f"${{{name}:-}}" for name in PASSED_THROUGH}
        env["AGENTMAIL_ASK_TIMEOUT"] = ask
        return {"type": "stdio", "command": command[0], "args": command[1:], "env": env}
    if platform.name == "gemini":
        env = {name: f"${{{name}}}" for name in PASSED_THROUGH}
        env["AGENTMAIL_ASK_TIMEOUT"] = ask
        timeout_ms = max(GEMINI_DEFAULT_TIMEOUT_MS, client_timeout(ask_timeout_s) * 1000)
        return {"command": command[0], "args": command[1:], "env": env, "timeout": timeout_ms}
    if platform.name == "opencode":
        env = {name: f"{{env:{name}}}" for name in PASSED_THROUGH}
        env["AGENTMAIL_ASK_TIMEOUT"] = ask
        return {"type": "local", "command": command, "environment": env, "enabled": True}
    if platform.name == "zcode":
        # No env interpolation is documented: the server inherits ZCode's environment.
        return {"type": "stdio", "command": command[0], "args": command[1:],
                "env": {"AGENTMAIL_ASK_TIMEOUT": ask}}  # fmt: skip
    raise ValueError(f"{platform.name} is not a JSON platform")


def merge_json(
    platform: Platform, settings: dict[str, Any], entry: dict[str, Any], ask_timeout_s: int
) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``settings`` with our entry (replacing an earlier one in place)."""
    merged: dict[str, Any] = json.loads(json.dumps(settings))  # a deep copy
    warnings: list[str] = []
    section = {"opencode": "mcp", "zcode": "mcp.servers"}.get(platform.name, "mcpServers")
    servers: Any = merged
    for key in section.split("."):
        servers = servers.setdefault(key, {})
        if not isinstance(servers, dict):
            raise install.SettingsError(f'"{section}" is not a JSON object')
    servers[SERVER_KEY] = entry
    if platform.name == "opencode":
        if not settings:
            merged = {"$schema": "https://opencode.ai/config.json", **merged}
        experimental = merged.setdefault("experimental", {})
        if not isinstance(experimental, dict):
            raise install.SettingsError('"experimental" is not a JSON object')
        wanted_ms = client_timeout(ask_timeout_s) * 1000
        current = experimental.get("mcp_timeout")
        if not isinstance(current, int | float) or isinstance(current, bool) or current < wanted_ms:
            experimental["mcp_timeout"] = wanted_ms
        if client_timeout(ask_timeout_s) > OPENCODE_STEP_LIMIT_S:
            warnings.append(
                f"opencode is reported to end every tool call after {OPENCODE_STEP_LIMIT_S} s "
                f"whatever its config says: keep --ask-timeout below {OPENCODE_STEP_LIMIT_S - 30}"
            )
    return merged, warnings


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, bar DEL and non-BMP escapes)."""
    out = json.dumps(value, ensure_ascii=False)
    return out.replace("\x7f", "\\u007f")


def codex_block(command: list[str], ask_timeout_s: int) -> str:
    """The ``[mcp_servers.agentmail]`` table (and its env table) as TOML text."""
    args = ", ".join(toml_string(a) for a in command[1:])
    env_vars = ", ".join(toml_string(n) for n in (*PASSED_THROUGH, "XDG_CONFIG_HOME"))
    return (
        f"[mcp_servers.{SERVER_KEY}]\n"
        f"command = {toml_string(command[0])}\n"
        f"args = [{args}]\n"
        f"env_vars = [{env_vars}]\n"
        f"startup_timeout_sec = {CODEX_STARTUP_TIMEOUT_S}\n"
        f"tool_timeout_sec = {client_timeout(ask_timeout_s)}\n"
        "\n"
        f"[mcp_servers.{SERVER_KEY}.env]\n"
        f"AGENTMAIL_ASK_TIMEOUT = {toml_string(str(ask_timeout_s))}\n"
    )


_HEADER = re.compile(r"^\s*\[(\[)?\s*(?P<key>[^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY_PART = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+)\s*(?:\.|$)')


def _table_key(raw: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    position = 0
    while position < len(raw):
        match = _KEY_PART.match(raw, position)
        if match is None or match.end() == position:
            return None
        token = match.group(1)
        if token.startswith('"'):
            token = json.loads(token)
        elif token.startswith("'"):
            token = token[1:-1]
        parts.append(token)
        position = match.end()
    return tuple(parts)


def merge_toml(text: str, block: str) -> str:
    """``text`` with every ``[mcp_servers.agentmail…]`` table replaced by ``block``
    (where the first one was; else appended). Raises SettingsError when the
    result would not parse back to the same settings plus exactly our table."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise install.SettingsError(f"it is not valid TOML ({error}); fix or move it") from error
    ours = ("mcp_servers", SERVER_KEY)
    kept: list[str] = []
    position: int | None = None
    inside = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        key = _table_key(header.group("key")) if header is not None else None
        if key is not None:  # a table header (not, say, a line of a multi-line array)
            inside = key[:2] == ours
            if inside and position is None:
                position = len(kept)
        if not inside:
            kept.append(line)
    if position is None:
        body = "".join(kept)
        if body and not body.endswith("\n"):
            body += "\n"
        if body.strip():
            body += "\n"
        result = body + block
    else:
        # The removed table's trailing blank lines went with it; keep one before the next.
        following = "".join(kept[position:])
        result = "".join(kept[:position]) + block + ("\n" + following if following.strip() else "")
    try:
        after = tomllib.loads(result)
    except tomllib.TOMLDecodeError as error:
        raise install.SettingsError(
            f"the file defines mcp_servers.{SERVER_KEY} in a way this command cannot edit "
            f"({error}); replace that definition by hand with:\n{block}"
        ) from error
    wanted = tomllib.loads(block)["mcp_servers"][SERVER_KEY]
    expected = json.loads(json.dumps(before, default=str))
    expected.setdefault("mcp_servers", {})[SERVER_KEY] = wanted
    if json.loads(json.dumps(after, default=str)) != expected:
        raise install.SettingsError(
            "editing the file as text would change more than the agentmail table; add "
            f"this by hand instead:\n{block}"
        )
    return result


# -- installing --------------------------------------------------------------------------------


def install_server(
    platform: Platform, path: Path, command: list[str], ask_timeout_s: int
) -> install.Result:
    """Merge our server into ``path``; write only when something changes."""
    warnings: list[str] = []
    current = install.read_text(path)
    if platform.kind == "toml":
        old = current
        new = merge_toml(old or "", codex_block(command, ask_timeout_s))
    else:
        existing = install.parse_settings(current)
        entry = json_entry(platform, command, ask_timeout_s)
        merged, warnings = merge_json(platform, existing or {}, entry, ask_timeout_s)
        if existing is not None and merged == existing:
            return install.Result(path, changed=False, diff="", warnings=tuple(warnings))
        old = install.render(existing) if existing is not None else None
        new = install.render(merged)
    if old is not None and new == old:
        return install.Result(path, changed=False, diff="", warnings=tuple(warnings))
    return install.write_changes(path, current, new, warnings)


#: Claude Code keeps a project's ``.mcp.json`` servers "pending approval" (and offers
#: none of their tools in ``claude -p``) until they are approved; listing them in
#: the project's *local* settings approves them (checked with 2.1.197, in a git
#: repository: outside one the server stayed pending). The shared
#: ``.claude/settings.json`` does not count: a committed file must not approve.
CLAUDE_LOCAL_SETTINGS = ".claude/settings.local.json"


def approve_claude_project_server(project: str) -> install.Result:
    """Add ``agentmail`` to ``enabledMcpjsonServers`` in the project's local settings."""
    path = Path(project).expanduser().absolute() / CLAUDE_LOCAL_SETTINGS
    existing = install.read_settings(path)
    merged: dict[str, Any] = json.loads(json.dumps(existing or {}))
    enabled = merged.setdefault("enabledMcpjsonServers", [])
    if not isinstance(enabled, list):
        raise install.SettingsError('"enabledMcpjsonServers" is not a JSON list')
    if SERVER_KEY in enabled and existing is not None:
        return install.Result(path, changed=False, diff="")
    enabled.append(SERVER_KEY)
    old = install.render(existing) if existing is not None else None
    return install.write_changes(path, old, install.render(merged), [])


@click.command("install-mcp")
@click.argument(
    "platform_name", metavar="PLATFORM", type=click.Choice(sorted([*PLATFORMS, *NO_MCP]))
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    metavar="DIR",
    help="Install into DIR's config (default: your user config in the home directory).",
)
@click.option(
    "--ask-timeout",
    type=click.IntRange(5, 86400),
    default=DEFAULT_ASK_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="How long ask_human waits for a person; the platform's tool timeout is set above it.",
)
@click.option(
    "--channel",
    is_flag=True,
    help="claude-code only: run the server as a Claude Code channel (`agentmail mcp "
    "--channel`): mail arrives in the running session and permission prompts are "
    "relayed. Start `claude --dangerously-load-development-channels server:agentmail` "
    "(docs/platforms.md).",
)
def install_mcp(platform_name: str, project: str | None, ask_timeout: int, channel: bool) -> None:
    """Register `agentmail mcp` as an MCP server of PLATFORM (claude-code, codex,
    opencode, gemini, zcode; pi has no MCP client and says what to use instead).

    Merges an `agentmail` entry into the platform's MCP config, keeping everything
    else; running it again changes nothing. No key is written: the server reads
    AGENTMAIL_URL, AGENTMAIL_KEY and AGENTMAIL_SESSION_ID from the agent's
    environment, else the stored config.
    """
    if platform_name in NO_MCP:
        fail(NO_MCP[platform_name])
    platform = PLATFORMS[platform_name]
    if channel and platform.name != "claude-code":
        fail("--channel: channels are Claude Code's; other platforms have none")
    try:
        path = config_path_for(platform, project)
    except install.SettingsError as error:
        fail(str(error))
    executable = install.agentmail_executable()
    command = [executable or "agentmail", "mcp", *(["--channel"] if channel else [])]
    try:
        result = install_server(platform, path, command, ask_timeout)
    except (install.SettingsError, OSError) as error:
        fail(f"not changing {path}: {error}")
    install.report(
        result,
        executable,
        unchanged=f"agentmail MCP server for {platform.name} already in {path}; no change.",
        done=f"Added the agentmail MCP server for {platform.name} to {path}.",
    )
    if platform.name == "claude-code" and project is not None:
        local = Path(project).expanduser().absolute() / CLAUDE_LOCAL_SETTINGS
        try:
            approval = approve_claude_project_server(project)
        except (install.SettingsError, OSError) as error:
            fail(
                f"not changing {local}: {error}; approve the server in `claude` "
                "(it stays pending approval until then)"
            )
        install.report(
            approval,
            executable,
            unchanged=f"the agentmail server is already approved in {local}; no change.",
            done=f"Approved the project's agentmail server in {local} (enabledMcpjsonServers).",
        )
        if not (Path(project).expanduser().absolute() / ".git").exists():
            click.echo(
                f"{project} is not a git repository: Claude Code may keep the server "
                "pending approval there; approve it once in `claude` (or use `claude "
                "--mcp-config .mcp.json`)."
            )
    if channel:
        click.echo(
            "Start Claude Code with `claude --dangerously-load-development-channels "
            "server:agentmail` (it asks you to confirm at start-up); Claude Code decides "
            "whether channels are available to your account (docs/platforms.md)."
        )
    if result.changed and platform.name == "codex" and project is not None:
        click.echo("Codex reads a project's .codex/config.toml only when the project is trusted.")
