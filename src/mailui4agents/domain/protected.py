"""Protected paths: what no agent may change, whatever the mode or grant
(docs/behaviour.md#rules-on-the-waiting-side).

A mail-driven agent can be talked into anything by a mail. If it could rewrite
the gateway's database, our own code, the hook settings that call our guard, or
the key files, it could switch the guard off and then do the rest unasked. So
guarded tool calls that touch these paths are refused *before* anyone is asked.

This check is a tripwire, not a boundary. File tools are checked exactly (after
normalising the path); shell commands can only be scanned for the paths as
text, which is conservative (false alarms are fine: the call is refused with a
clear reason) but can be evaded by a determined command (``cd ~; cd .s*``).
The real boundary is the bridge's verified sandbox (docs/behaviour.md#bridge).

Everything here is pure: the caller passes the environment, home directory,
package directory and cwd in.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Mapping

from mailui4agents.domain.policy import classify_tool
from mailui4agents.domain.tool_names import FILE_TOOL_PATH_KEYS, SHELL_TOOLS

# Names that are protected wherever they are, for the shell scan. They catch
# the relative and ``~`` spellings the absolute paths miss (``cd; vi .ssh/x``)
# and the hook settings of *any* project (a workspace's own .claude/settings.json
# can hold hooks that run with the agent's rights).
# ``.ssh`` without the slash also catches ``rm -rf ~/.ssh`` when ``home`` is unknown.
PROTECTED_NAMES: tuple[str, ...] = (
    ".claude/settings",
    ".gemini/settings",
    "agentmail-data",
    ".ssh",
    ".gnupg",
)

# File basenames that are protected wherever they are: hook settings of any
# project (checked together with their parent directory) and private keys.
_SETTINGS_RULES: tuple[tuple[str, str], ...] = (
    (".claude", "settings*.json"),
    (".gemini", "settings.json"),
)
_KEY_BASENAMES: frozenset[str] = frozenset(
    {"id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "authorized_keys"}
)
_KEY_SUFFIXES: tuple[str, ...] = (".pem", ".key")


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _config_home(home: str, env: Mapping[str, str]) -> str:
    """``$XDG_CONFIG_HOME`` when set (as the client's config_path reads it), else ~/.config."""
    return env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")


def protected_paths(
    data_dir: str | None,
    extra: list[str],
    *,
    home: str,
    env: Mapping[str, str],
    package_dir: str | None,
) -> list[str]:
    """The protected paths, normalised, without duplicates, in a stable order.

    ``data_dir`` is the gateway's data directory (``AGENTMAIL_DATA_DIR`` or
    ./agentmail-data, made absolute by the caller); ``package_dir`` the
    installed mailui4agents package. The agentmail config dir honours
    ``XDG_CONFIG_HOME`` like the client does; ~/.config/agentmail is protected
    as well, since a later run without the variable would read it. Claude
    Code's ``CLAUDE_CONFIG_DIR`` moves its user settings, so those are covered
    too. The system-wide settings of both platforms can also hold hooks.
    """
    config_home = _config_home(home, env)
    default_config = os.path.join(home, ".config")
    candidates: list[str] = []
    if data_dir:
        candidates.append(data_dir)
    candidates += [
        os.path.join(config_home, "agentmail"),
        os.path.join(default_config, "agentmail"),
    ]
    if package_dir:
        candidates.append(package_dir)
    candidates += [
        os.path.join(home, ".ssh"),
        os.path.join(home, ".gnupg"),
        "/etc/systemd",
        os.path.join(config_home, "systemd"),
        os.path.join(default_config, "systemd"),
        os.path.join(home, ".claude", "settings.json"),
        os.path.join(home, ".claude", "settings.local.json"),
        "/etc/claude-code",
        os.path.join(home, ".gemini", "settings.json"),
        "/etc/gemini-cli",
    ]
    claude_dir = env.get("CLAUDE_CONFIG_DIR")
    if claude_dir:
        candidates += [
            os.path.join(claude_dir, "settings.json"),
            os.path.join(claude_dir, "settings.local.json"),
        ]
    candidates += extra
    seen: set[str] = set()
    result: list[str] = []
    for candidate in candidates:
        if not candidate:
            continue
        normalised = _norm(candidate)
        if normalised not in seen:
            seen.add(normalised)
            result.append(normalised)
    return result


def _fold(text: str) -> str:
    # Case-folded comparison: on case-insensitive file systems (macOS) ~/.SSH is
    # ~/.ssh; on Linux the extra matches are only false alarms.
    return text.casefold()


def _within(path: str, root: str) -> bool:
    path, root = _fold(path), _fold(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _resolve(path: str, cwd: str, home: str | None) -> str | None:
    """Absolute normalised form of ``path`` as the tool would see it, or None
    when it names a home directory we cannot know (``~`` without ``home``,
    ``~user``)."""
    if path.startswith("~"):
        head, _, tail = path.partition("/")
        if head != "~" or not home:
            return None
        path = os.path.join(home, tail)
    return _norm(os.path.join(cwd, path))


def _basename_rule(resolved: str) -> bool:
    parent = os.path.basename(os.path.dirname(resolved))
    name = os.path.basename(resolved)
    for directory, pattern in _SETTINGS_RULES:
        if _fold(parent) == directory and fnmatch.fnmatchcase(_fold(name), pattern):
            return True
    folded = _fold(name)
    return folded in _KEY_BASENAMES or folded.endswith(_KEY_SUFFIXES)


def _check_file_path(path: str, protected: list[str], cwd: str, home: str | None) -> str | None:
    resolved = _resolve(path, cwd, home)
    if resolved is None:
        return path  # a home we cannot resolve: refuse rather than guess
    for entry in protected:
        if _within(resolved, _resolve(entry, cwd, home) or entry):
            return entry
    if _basename_rule(resolved):
        return resolved
    return None


def _spellings(entry: str, cwd: str, home: str | None) -> Iterator[str]:
    """The ways a shell command might write a protected path."""
    absolute = _resolve(entry, cwd, home) or entry
    yield absolute
    if home and home != "/" and _within(absolute, home) and _fold(absolute) != _fold(home):
        relative = os.path.relpath(absolute, home)
        yield "~/" + relative
        yield "$HOME/" + relative
        yield "${HOME}/" + relative
        yield relative  # after `cd` / `cd ~`
    if _within(absolute, cwd) and _fold(absolute) != _fold(cwd):
        yield os.path.relpath(absolute, cwd)


_QUOTES_AND_ESCAPES = re.compile(r"[\"'\\]")
_REPEATED_SLASHES = re.compile(r"/{2,}")
_DOT_SEGMENTS = re.compile(r"/(?:\./)+")


def _variants(command: str) -> list[str]:
    """The command as written, and with quoting and ``//``, ``/./`` undone, so
    that ``~/'.ssh'`` or ``/home/u//.ssh`` are still recognised."""
    plain = _QUOTES_AND_ESCAPES.sub("", command)
    plain = _REPEATED_SLASHES.sub("/", plain)
    plain = _DOT_SEGMENTS.sub("/", plain)
    return [_fold(command), _fold(plain)]


def _scan_text(text: str, protected: list[str], cwd: str, home: str | None) -> str | None:
    variants = _variants(text)
    for entry in protected:
        absolute = _resolve(entry, cwd, home) or entry
        if _within(cwd, absolute):
            return entry  # every relative path in the command is inside it
        for spelling in _spellings(entry, cwd, home):
            needle = _fold(spelling)
            if needle and any(needle in variant for variant in variants):
                return entry
    for name in PROTECTED_NAMES:
        if any(_fold(name) in variant for variant in variants):
            return name
    return None


def _strings(value: object, depth: int = 0) -> Iterator[str]:
    if depth > 50:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)


def touches_protected(
    tool_name: str,
    tool_input: Mapping[str, object],
    protected: list[str],
    cwd: str,
    *,
    home: str | None = None,
) -> str | None:
    """The protected path (or protected name) a guarded tool call would touch, or None.

    - Read and mail tools: None (they change nothing; reading is bounded by
      the workspace isolation of docs/access.md, not here).
    - File tools: each target path the input names is resolved against ``cwd``
      (``~`` via ``home``) and normalised, then matched component-wise against
      ``protected``, then against the basename rules (any ``.claude/settings*.json``,
      any ``.gemini/settings.json``, private key files). A ``~`` path that
      cannot be resolved is refused.
    - Shell tools: the command is scanned as text for every protected path,
      its ``~``/``$HOME`` and home-relative forms, its form relative to
      ``cwd``, and :data:`PROTECTED_NAMES`. A cwd inside a protected path
      touches it by definition.
    - Other guarded tools (unknown or third-party tools), and file tools whose
      input names no path under a known key: every string in the input is
      scanned the same way, since we do not know which one is a path.
    """
    if classify_tool(tool_name) != "guarded":
        return None
    cwd = _norm(cwd) if cwd else "/"
    if not isinstance(tool_input, Mapping):
        return None
    keys = FILE_TOOL_PATH_KEYS.get(tool_name, ())
    paths = [value for key in keys if isinstance(value := tool_input.get(key), str) and value]
    if paths:
        for path in paths:
            hit = _check_file_path(path, protected, cwd, home)
            if hit is not None:
                return hit
        return None
    if tool_name in SHELL_TOOLS:
        command = tool_input.get("command")
        texts: list[str] = [command] if isinstance(command, str) else []
    else:
        texts = list(_strings(tool_input))
    for text in texts:
        hit = _scan_text(text, protected, cwd, home)
        if hit is not None:
            return hit
    return None
