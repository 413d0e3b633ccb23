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
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class GrantRule:
    """A standing grant: the tool, and optionally a command or path prefix.

    ``pattern`` None means every input of that tool.
    """

    tool_name: str
    pattern: str | None


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


def grant_matches(rule: GrantRule, tool_name: str, tool_input: Mapping[str, object]) -> bool:
    """True when ``rule`` covers this call of ``tool_name`` with ``tool_input``."""
    if rule.tool_name != tool_name:
        return False
    if rule.pattern is None:
        return True
    target = command_of(tool_name, tool_input)
    if target is None:
        return False
    if tool_name in SHELL_TOOLS:
        return shell_pattern_matches(rule.pattern, target)
    if tool_name in FILE_TOOLS:
        return path_is_within(target, rule.pattern)
    return False
