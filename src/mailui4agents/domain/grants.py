"""Standing grants ("always allow", docs/behaviour.md#grants): does a stored rule cover a tool call?

A grant is created by a human who approved one concrete call and clicked
"always". The matching rule must therefore never cover more than a careful
reader of the grant would expect: "always allow ``git status``" must not let
through ``git status; rm -rf ~``. Every rule here errs towards *not* matching —
a missed match only means the human is asked again.

Shell grants (``Bash``, ``PowerShell``, ``run_shell_command``) with a pattern:

1. A pattern that itself contains shell control syntax matches only the exact
   same command (a prefix ending in ``&&`` would otherwise cover any command).
2. Otherwise the command must equal the pattern, or start with the pattern
   followed by a word boundary: the pattern ends with a space, or the next
   character of the command is a space. So ``git st`` does not cover
   ``git status``, while ``git status`` covers ``git status --short``.
3. The remainder after the pattern must contain no shell control syntax:
   ``;`` ``&`` ``|`` backquote ``$(`` ``${`` ``>`` ``<`` or a line break (which
   also covers backslash-newline). This is checked without regard to quoting,
   so ``git commit -m "a; b"`` is not covered by ``git commit`` — asked again,
   which is the safe direction. The set also covers PowerShell's separators
   (``;``, ``|``, ``&``, ``$(``, backquote is its escape character).

A prefix grant still trusts the program with any *arguments* (``find .`` covers
``find . -delete``); that is what the human granted.

File grants (``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit``,
``write_file``, ``replace``) with a pattern: the pattern is an absolute path
prefix matched on path-component boundaries after ``os.path.normpath`` of both
sides, so ``/srv/shop`` covers ``/srv/shop/a.py`` but not ``/srv/shopping/x``
nor ``/srv/shop/../etc/passwd``. Relative paths (on either side) never match:
without the cwd we cannot know what they name. Symlinks are not resolved (this
is pure); the protected-path check and the sandbox are the other layers.

A pattern on any other tool cannot be interpreted, so it matches nothing.

What a grant covers is its ``scope`` (``grants.scope``, migration 0013):

- ``exact``: the one input that was approved ("Always allow" without a
  pattern). ``pattern`` holds :func:`exact_pattern` of that input: the command
  of a shell tool, the normalised absolute path of a file tool, the canonical
  JSON of any other tool's input. A later call matches when its own
  :func:`exact_pattern` is the same string, so ``npm test`` covers neither
  ``npm test --watch`` nor ``npm test; rm -rf /``. The stored input is the
  masked one (domain/masking.py) while calls are matched as sent: an input
  with a secret in it is asked again each time, the safe direction.
- ``prefix``: the pattern rules above (a command or path prefix).
- ``every``: every input of the tool: the pattern ``*``, and the pattern-less
  grants made before migration 0013, which then meant every input.

An unknown scope, or a prefix grant without a pattern, matches nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

# Tool names live where the hook's fast path can import them without this
# module's dataclasses (mailui4agents/domain/tool_names.py); re-exported here.
from mailui4agents.domain.tool_names import FILE_TOOL_PATH_KEYS as FILE_TOOL_PATH_KEYS
from mailui4agents.domain.tool_names import FILE_TOOLS as FILE_TOOLS
from mailui4agents.domain.tool_names import SHELL_TOOLS as SHELL_TOOLS

# Shell syntax that ends one command and starts another, or runs a command
# inside this one, or redirects to a file. Checked as plain substrings.
SHELL_CONTROL_SEQUENCES: tuple[str, ...] = (";", "&", "|", "`", "$(", "${", ">", "<", "\n", "\r")


EXACT, PREFIX, EVERY = "exact", "prefix", "every"
EVERY_INPUT = "*"
"""The pattern a human gives for a grant that covers every input of its tool."""


@dataclass(frozen=True)
class GrantRule:
    """A standing grant: the tool, its pattern, and what the pattern means
    (``scope``: EXACT, PREFIX or EVERY, see the module docstring)."""

    tool_name: str
    pattern: str | None
    scope: str = PREFIX


def command_of(tool_name: str, tool_input: Mapping[str, object]) -> str | None:
    """The part of the input a grant pattern is matched against, or None.

    Shell tools: ``command``. File tools: their target path. When a file tool
    names its target under several keys with *different* values, we cannot
    tell which one the tool will use, so there is no single answer: None.
    A non-string value also gives None.
    """
    if not isinstance(tool_input, Mapping):
        return None
    if tool_name in SHELL_TOOLS:
        command = tool_input.get("command")
        return command if isinstance(command, str) else None
    keys = FILE_TOOL_PATH_KEYS.get(tool_name)
    if keys is None:
        return None
    present = [tool_input[key] for key in keys if key in tool_input]
    if not present or not all(isinstance(value, str) for value in present):
        return None
    if len(set(present)) != 1:
        return None
    value = present[0]
    return value if isinstance(value, str) else None


def has_shell_control(text: str) -> bool:
    """True when ``text`` contains any of :data:`SHELL_CONTROL_SEQUENCES`."""
    return any(sequence in text for sequence in SHELL_CONTROL_SEQUENCES)


def shell_pattern_matches(pattern: str, command: str) -> bool:
    """The shell rule described in the module docstring."""
    if not pattern.strip():
        return False  # a blank pattern is a broken grant, not "everything"
    if has_shell_control(pattern):
        return command == pattern
    if command == pattern:
        return True
    if not command.startswith(pattern):
        return False
    rest = command[len(pattern) :]
    if not (pattern.endswith(" ") or rest.startswith(" ")):
        return False
    return not has_shell_control(rest)


def path_is_within(path: str, root: str) -> bool:
    """True when normalised ``path`` is ``root`` or lies below it (component-wise).

    Both must be absolute; a relative one never matches.
    """
    if not (os.path.isabs(path) and os.path.isabs(root)):
        return False
    path = os.path.normpath(path)
    root = os.path.normpath(root)
    if path == root:
        return True
    return path.startswith(root.rstrip(os.sep) + os.sep)


def exact_pattern(tool_name: str, tool_input: Mapping[str, object]) -> str | None:
    """What an exact grant of this call stores and a later call must equal, or
    None when the call has no single such value (then a grant needs a pattern).

    Shell tools: the command, as it is. File tools: the target path,
    normalised, when it is absolute (a relative path names nothing without the
    cwd). Any other tool: its whole input as canonical JSON (sorted keys).
    """
    if not isinstance(tool_input, Mapping):
        return None
    if tool_name in SHELL_TOOLS:
        return command_of(tool_name, tool_input)
    if tool_name in FILE_TOOLS:
        path = command_of(tool_name, tool_input)
        if path is None or not os.path.isabs(path):
            return None
        return os.path.normpath(path)
    try:
        return json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def new_grant(
    tool_name: str, tool_input: Mapping[str, object], pattern: str | None
) -> GrantRule | None:
    """The grant a decider makes with "always" on this call: without a pattern
    the call itself (EXACT; None when it has no exact form), ``*`` every input,
    any other pattern a prefix."""
    if pattern is None:
        exact = exact_pattern(tool_name, tool_input)
        return None if exact is None else GrantRule(tool_name, exact, EXACT)
    if pattern.strip() == EVERY_INPUT:
        return GrantRule(tool_name, EVERY_INPUT, EVERY)
    return GrantRule(tool_name, pattern, PREFIX)


def covers_parts(rule: GrantRule) -> tuple[str, str | None, str]:
    """:func:`covers` in three parts: the words before the grant's command or
    path, that command or path (None when there is none), the words after it;
    a page shows the middle part as code."""
    tool, pattern = rule.tool_name, rule.pattern
    if rule.scope == EVERY:
        if tool in SHELL_TOOLS:
            return f"every {tool} command", None, ""
        if tool in FILE_TOOLS:
            return f"every file ({tool})", None, ""
        return f"every {tool} call", None, ""
    if pattern is None or rule.scope not in (EXACT, PREFIX):
        return "nothing", None, ""
    if rule.scope == EXACT:
        return "exactly ", pattern, ""
    if tool in SHELL_TOOLS:
        if not pattern.strip():
            return "nothing (a blank pattern)", None, ""
        if has_shell_control(pattern):
            return "exactly ", pattern, ""
        return "", pattern, " and what follows it"
    if tool in FILE_TOOLS:
        if not os.path.isabs(pattern):
            return "nothing (a relative path)", None, ""
        return f"files under {os.path.normpath(pattern)}", None, ""
    return "nothing (a pattern on this tool matches nothing)", None, ""


def covers(rule: GrantRule) -> str:
    """What the grant allows, in words, for lists and buttons: "every Bash
    command", "exactly `npm test`", "`git status` and what follows it",
    "files under /srv/shop". Says "nothing" where the grant matches nothing."""
    before, code, after = covers_parts(rule)
    return before + ("" if code is None else f"`{code}`") + after


# Keys of a shell call that change nothing about what runs. Any other key set
# to something (Claude's `dangerouslyDisableSandbox: true` or
# `run_in_background: true`, Gemini's `directory: ".."`) makes the call one no
# exact or prefix grant covers: a grant of `make test` must not let `make test`
# through outside the sandbox or elsewhere. Such a key left at its empty value
# (false, "", null, 0: what Claude Code sends by default) changes nothing.
SHELL_COSMETIC_KEYS = frozenset({"command", "description", "timeout"})


def _plain_call(tool_name: str, tool_input: Mapping[str, object]) -> bool:
    """Is this call one an exact or prefix grant may cover at all?

    Shell tools: only the command and cosmetic keys. File tools: the target
    written as its own normal form — `/srv/shop/link/../app.py` names, to the
    kernel, wherever `link` points, not `/srv/shop/app.py`."""
    if tool_name in SHELL_TOOLS:
        return all(
            key in SHELL_COSMETIC_KEYS or value in (False, None, "", 0)
            for key, value in tool_input.items()
        )
    if tool_name in FILE_TOOLS:
        target = command_of(tool_name, tool_input)
        return target is not None and os.path.normpath(target) == target
    return True


def grant_matches(rule: GrantRule, tool_name: str, tool_input: Mapping[str, object]) -> bool:
    """True when ``rule`` covers this call of ``tool_name`` with ``tool_input``."""
    if rule.tool_name != tool_name:
        return False
    if rule.scope == EVERY:
        return True
    if rule.pattern is None:
        return False  # a grant without its value is broken, not "everything"
    if not isinstance(tool_input, Mapping) or not _plain_call(tool_name, tool_input):
        return False
    if rule.scope == EXACT:
        return exact_pattern(tool_name, tool_input) == rule.pattern
    if rule.scope != PREFIX:
        return False
    target = command_of(tool_name, tool_input)
    if target is None:
        return False
    if tool_name in SHELL_TOOLS:
        return shell_pattern_matches(rule.pattern, target)
    if tool_name in FILE_TOOLS:
        return path_is_within(target, rule.pattern)
    return False
