"""Rules before the human (docs/rules.md): what decides a guarded tool call
before anyone is asked, as pure functions.

A rule has an effect (``allow``, ``deny``, ``ask``), a tool, an optional
pattern and a scope (one session, a workspace, everywhere). Patterns are the
grant syntax of domain/grants.py — a command prefix for shell tools, an
absolute path prefix for file tools, ``*`` (or none) for every input — and are
matched with its functions, with one difference in the safe direction:

- an ``allow`` rule matches exactly as a prefix grant does
  (:func:`~mailui4agents.domain.grants.grant_matches`): it never covers a
  compound command, a redirect, an unusual flag such as
  ``dangerouslyDisableSandbox``, or a path written with ``..``;
- a ``deny`` or ``ask`` rule also matches when *any* simple command of a
  compound one matches (``cd x && git push --force`` is caught by
  ``git push --force``), and matches file paths after normalising them. A
  missed deny lets something run, so these err towards matching.

The order (:func:`decide`), most conservative first:

1. deny rules (the built-in ones included): deny, in every mode;
2. ``plan`` mode: refused (``mode_forbids``) — nothing widens plan;
3. ask rules: a human is asked, whatever grant, allow rule or mode would allow;
4. standing grants, then allow rules: approved;
5. ``full`` mode: allowed (``mode_allows``);
6. a human is asked.

Protected paths come before all of this, on the agent's side (hooks/core.py).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from mailui4agents.domain.grants import (
    EVERY,
    EVERY_INPUT,
    PREFIX,
    GrantRule,
    command_of,
    grant_matches,
    path_is_within,
    shell_pattern_matches,
)
from mailui4agents.domain.tool_names import FILE_TOOLS, SHELL_TOOLS

Effect = Literal["allow", "deny", "ask"]
EFFECTS: tuple[Effect, ...] = ("allow", "deny", "ask")
Scope = Literal["session", "workspace", "global"]
SCOPES: tuple[Scope, ...] = ("session", "workspace", "global")

MAX_PATTERN = 1000
MAX_REASON = 500
MAX_TOOL = 200
MAX_RULES_PER_AUTHOR = 500
"""Most rules one person may have (a global limit is the admins' sum)."""


@dataclass(frozen=True)
class Rule:
    """One rule as the decision sees it. ``id`` is what ``decided_by`` names
    (``rule:<id>``); built-in rules have ids starting with ``builtin-``."""

    id: str
    effect: Effect
    tool_name: str
    pattern: str | None = None
    reason: str | None = None


def grant_rule_of(rule: Rule) -> GrantRule:
    """The grant that means what the rule's tool and pattern mean."""
    if rule.pattern is None or rule.pattern.strip() == EVERY_INPUT:
        return GrantRule(rule.tool_name, EVERY_INPUT, EVERY)
    return GrantRule(rule.tool_name, rule.pattern, PREFIX)


# Where one simple command ends and another starts (or a command runs inside
# another). A plain split, not a parser: see the module docstring.
_SEGMENT_SPLIT = re.compile(r"\|\||&&|\$\(|[;&|`\n\r()]")


@lru_cache(maxsize=64)
def simple_commands(command: str) -> tuple[str, ...]:
    """The simple commands of a compound command line, stripped, empty ones dropped
    (cached: every deny rule and built-in of one request splits the same command)."""
    return tuple(part.strip() for part in _SEGMENT_SPLIT.split(command) if part.strip())


def rule_matches(rule: Rule, tool_name: str, tool_input: Mapping[str, object]) -> bool:
    """Does ``rule`` cover this call (see the module docstring)?"""
    grant = grant_rule_of(rule)
    if rule.effect == "allow":
        return grant_matches(grant, tool_name, tool_input)
    if rule.tool_name != tool_name:
        return False
    if grant.scope == EVERY:
        return True
    assert grant.pattern is not None
    target = command_of(tool_name, tool_input) if isinstance(tool_input, Mapping) else None
    if tool_name in SHELL_TOOLS:
        if target is None:
            return False
        if shell_pattern_matches(grant.pattern, target.strip()):
            return True
        return any(shell_pattern_matches(grant.pattern, part) for part in simple_commands(target))
    if tool_name in FILE_TOOLS:
        if target is None:
            # No single target (several keys disagree): any of them may be written.
            paths = [v for v in tool_input.values() if isinstance(v, str)]
            return any(path_is_within(p, grant.pattern) for p in paths)
        return path_is_within(target, grant.pattern)
    return False  # a pattern on another tool cannot be interpreted (as for grants)


# --- built-in deny rules (docs/rules.md, "Built-in rules") -----------------

# A safety net on the command *text*: a command spelt another way (a variable,
# an alias, a script file, `find -delete`) passes. The boundary is the sandbox
# and the human; these catch the common catastrophic spellings.

_TOP_LEVEL_HOME = ("~", "$HOME", "${HOME}")


@lru_cache(maxsize=64)
def _words(segment: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(segment, comments=False, posix=True))
    except ValueError:
        return tuple(segment.split())


def _skip_prefixes(words: Sequence[str]) -> list[str]:
    """Words after `sudo`, `env VAR=…`, `command`, `exec`, `nice`, `time`,
    leading variable assignments and their options."""
    i = 0
    while i < len(words):
        w = words[i]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w):
            i += 1
        elif w in ("sudo", "doas", "env", "command", "exec", "nice", "time", "nohup", "builtin"):
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            break
    return list(words[i:])


def _program(word: str) -> str:
    return posixpath.basename(word)


def _rm_target_catastrophic(target: str, workspace: str) -> bool:
    """Is removing ``target`` recursively catastrophic: the root, a top-level
    folder, a home folder, everything in one of those, or the workspace or one
    of its parents? Relative paths (inside the cwd) are not."""
    for home in _TOP_LEVEL_HOME:
        if target == home or target.startswith(home + "/"):
            return target[len(home) :].strip("/") in ("", "*", ".*")
    if re.fullmatch(r"~[A-Za-z0-9_.-]*/?\*?", target):
        return True  # ~ or ~user, or all in it
    if not target.startswith("/"):
        return False
    base = target[:-1] if target.endswith("*") else target  # `/etc/*` empties `/etc`
    norm = posixpath.normpath(base or "/")
    parts = [p for p in norm.split("/") if p]
    if len(parts) <= 1:
        return True  # `/`, `/etc`, `/home`, `/*`
    if parts[0] == "home" and len(parts) == 2:
        return True  # /home/ana
    if workspace.startswith("/"):
        return path_is_within(posixpath.normpath(workspace), norm)  # it or a parent
    return False


def _rm_recursive_force(args: list[str]) -> tuple[bool, list[str]]:
    recursive = force = False
    targets: list[str] = []
    options_done = False
    for a in args:
        if options_done or not a.startswith("-") or a == "-":
            targets.append(a)
        elif a == "--":
            options_done = True
        elif a.startswith("--"):
            recursive |= a == "--recursive"
            force |= a == "--force"
        else:
            recursive |= "r" in a or "R" in a
            force |= "f" in a
    return recursive and force, targets


def _rm_rf_outside(command: str, workspace: str) -> bool:
    for segment in simple_commands(command):
        words = _skip_prefixes(_words(segment))
        if not words or _program(words[0]) != "rm":
            continue
        rf, targets = _rm_recursive_force(words[1:])
        if rf and any(_rm_target_catastrophic(t, workspace) for t in targets):
            return True
    return False


_DEFAULT_BRANCHES = ("main", "master")


def _push_force_default(command: str, workspace: str) -> bool:
    del workspace
    for segment in simple_commands(command):
        words = _skip_prefixes(_words(segment))
        if len(words) < 2 or _program(words[0]) != "git":
            continue
        # `git -C dir push …`: skip git's own options.
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in ("-C", "-c", "--git-dir", "--work-tree") else 1
        if i >= len(words) or words[i] != "push":
            continue
        args = words[i + 1 :]
        force = any(
            a in ("-f", "--force")
            or a.startswith("--force")
            or (a.startswith("-") and not a.startswith("--") and "f" in a)
            for a in args
        )
        positional = [a for a in args if not a.startswith("-")]
        refspecs = positional[1:]  # the first is the remote
        forced_ref = any(r.startswith("+") for r in refspecs)
        if not (force or forced_ref):
            continue
        if not refspecs:
            return True  # the current branch, which may be the default one: refused
        for ref in refspecs:
            dst = ref.lstrip("+").split(":")[-1].removeprefix("refs/heads/")
            if dst in _DEFAULT_BRANCHES or dst == "HEAD":
                return True
    return False


STARTUP_FILES: tuple[str, ...] = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".xprofile",
    "config.fish",
    "bash.bashrc",
    "environment",
)
"""Files a shell (or a login) reads at start-up: code written there runs in
every later shell of the user, outside any session."""

_STARTUP_NAMES = "|".join(re.escape(n) for n in STARTUP_FILES)
# A write into a start-up file: a redirect, or a writing program with the file
# among its later words.
_STARTUP_REDIRECT = re.compile(r">>?\|?\s*[\"']?(\S*/)?(" + _STARTUP_NAMES + r")[\"']?(\s|$)")
_WRITING_PROGRAMS = frozenset(
    {"tee", "cp", "mv", "ln", "install", "dd", "truncate", "rsync", "chmod", "chown", "touch"}
)
_STARTUP_ETC = (
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/zsh",
    "/etc/environment",
)


def _is_startup_path(path: str) -> bool:
    name = posixpath.basename(path.rstrip("/"))
    if name not in STARTUP_FILES:
        return any(path == p or path.startswith(p + "/") for p in _STARTUP_ETC)
    if name == "environment":
        return path.endswith("/etc/environment")
    if name == "config.fish":
        return "/.config/fish/" in path or path.startswith("~/.config/fish/")
    if name == "bash.bashrc":
        return path.startswith("/etc/")
    return True


def _writes_startup_file(command: str, workspace: str) -> bool:
    del workspace
    if _STARTUP_REDIRECT.search(command):
        return True
    for segment in simple_commands(command):
        words = _skip_prefixes(_words(segment))
        if not words:
            continue
        program = _program(words[0])
        in_place = program in ("sed", "perl") and any(
            w.startswith("-i") or (w.startswith("-") and "i" in w and program == "perl")
            for w in words[1:]
        )
        writes = program in _WRITING_PROGRAMS or in_place
        if writes and any(_is_startup_path(w) for w in words[1:]):
            return True
    return False


_SHELLS = r"(?:sh|bash|zsh|dash|ksh|fish|python[0-9.]*|perl|ruby|node)"
_CURL_PIPE = re.compile(
    r"\b(?:curl|wget|fetch)\b[^\n;]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\S+=\S*\s+)*)?"
    r"(?:\S*/)?" + _SHELLS + r"\b"
)
_SHELL_OF_DOWNLOAD = re.compile(
    r"\b" + _SHELLS + r"\b[^\n;|]*(?:<\(|\$\(|`)\s*(?:curl|wget|fetch)\b"
)


def _curl_pipe_shell(command: str, workspace: str) -> bool:
    del workspace
    return bool(_CURL_PIPE.search(command) or _SHELL_OF_DOWNLOAD.search(command))


@dataclass(frozen=True)
class Builtin:
    """A built-in deny rule: its id (``rule:<id>`` in ``decided_by``), what it
    refuses, and why (docs/rules.md, "Built-in rules")."""

    id: str
    title: str
    reason: str


BUILTINS: tuple[Builtin, ...] = (
    Builtin(
        "builtin-rm-rf",
        "rm -rf of /, a top-level folder, a home folder or a parent of the workspace",
        "removes far more than the workspace, usually irrecoverably",
    ),
    Builtin(
        "builtin-force-push",
        "git push --force (or -f, or a +refspec) to main, master, HEAD or the current branch",
        "rewrites the shared history of the default branch for everyone",
    ),
    Builtin(
        "builtin-shell-startup",
        "writing to a shell's start-up files (~/.bashrc, ~/.profile, ~/.zshrc, …)",
        "code there runs in every later shell of the user, outside any session",
    ),
    Builtin(
        "builtin-curl-shell",
        "curl … | sh, wget … | bash and the like",
        "runs code downloaded a moment ago that nobody has read",
    ),
)
BUILTIN_IDS: frozenset[str] = frozenset(b.id for b in BUILTINS)
_BUILTIN_SHELL = {
    "builtin-rm-rf": _rm_rf_outside,
    "builtin-force-push": _push_force_default,
    "builtin-shell-startup": _writes_startup_file,
    "builtin-curl-shell": _curl_pipe_shell,
}


def builtin_matches(
    builtin_id: str, tool_name: str, tool_input: Mapping[str, object], workspace: str
) -> bool:
    """Does the built-in rule ``builtin_id`` refuse this call?"""
    if not isinstance(tool_input, Mapping):
        return False
    if tool_name in SHELL_TOOLS:
        command = tool_input.get("command")
        if not isinstance(command, str):
            return False
        return _BUILTIN_SHELL[builtin_id](command, workspace)
    if tool_name in FILE_TOOLS and builtin_id == "builtin-shell-startup":
        paths = [v for v in tool_input.values() if isinstance(v, str) and v.startswith(("/", "~"))]
        return any(
            _is_startup_path(p)
            and not (workspace and path_is_within(os.path.normpath(p), workspace))
            for p in paths
        )
    return False


def builtin_rule(b: Builtin) -> Rule:
    return Rule(b.id, "deny", "*", None, f"built-in rule: {b.title} ({b.reason})")


# --- the order ---------------------------------------------------------------

Outcome = Literal["deny", "allow", "mode_allows", "mode_forbids", "human"]


@dataclass(frozen=True)
class Decision:
    """What the rules, grants and mode decided: ``by`` is ``rule:<id>`` or
    ``grant:<id>`` for a deny or allow, None otherwise; ``rule`` the deciding rule
    — for ``human``, the ask rule that sends the call to a person (then nothing
    later in the order, a proven sandbox included, may allow it)."""

    outcome: Outcome
    by: str | None = None
    rule: Rule | None = None


def decide(
    *,
    tool_name: str,
    tool_input: Mapping[str, object],
    mode: str,
    workspace: str,
    rules: Sequence[Rule],
    grants: Iterable[tuple[str, GrantRule]],
    builtins_on: Iterable[str] = BUILTIN_IDS,
) -> Decision:
    """The order of the module docstring for one approval. ``rules`` are those
    that apply to the session (already filtered by scope and author), in the
    order the first match wins; ``grants`` its standing grants (id, rule);
    ``builtins_on`` the built-in rules not switched off."""
    on = set(builtins_on)
    for b in BUILTINS:
        if b.id in on and builtin_matches(b.id, tool_name, tool_input, workspace):
            return Decision("deny", f"rule:{b.id}", builtin_rule(b))
    for rule in rules:
        if rule.effect == "deny" and rule_matches(rule, tool_name, tool_input):
            return Decision("deny", f"rule:{rule.id}", rule)
    if mode == "plan":
        return Decision("mode_forbids")
    for rule in rules:
        if rule.effect == "ask" and rule_matches(rule, tool_name, tool_input):
            return Decision("human", None, rule)  # `rule`: an ask rule, nothing may allow it
    for grant_id, grant in grants:
        if grant_matches(grant, tool_name, tool_input):
            return Decision("allow", f"grant:{grant_id}")
    for rule in rules:
        if rule.effect == "allow" and rule_matches(rule, tool_name, tool_input):
            return Decision("allow", f"rule:{rule.id}", rule)
    if mode == "full":
        return Decision("mode_allows")
    return Decision("human")


def model_reason(decision: Decision) -> str:
    """What the row's note says (and so the model is told) for a rule's decision."""
    rule = decision.rule
    assert rule is not None
    verb = "denied" if decision.outcome == "deny" else "approved"
    why = f": {rule.reason}" if rule.reason else ""
    return f"{verb} by rule {rule.id}{why}"
