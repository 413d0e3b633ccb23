"""Workspace roots: the folders an agent may be set to work in, as globs.

An agent's owners give it roots (`/srv/*`, `/home/ana/src/**`, `/srv/shop`); a
mail session with the agent in any other workspace is refused, and the bridge
checks its own roots again before it runs a turn (docs/access.md, "Who may set
an agent to work"). The gateway never sees the bridge's disk, so matching is
lexical, on normalised paths (domain/workspaces.py); symlinks are the bridge's
concern (it resolves the workspace before it matches).

A root is matched one path component at a time:
- a component without wildcards matches itself exactly;
- `*`, `?` and `[…]` inside a component match within that component only
  (`/srv/*` covers `/srv/shop`, not `/srv/shop/web` nor `/srv`);
- a component that is exactly `**` matches zero or more components
  (`/home/ana/src/**` covers `/home/ana/src` and everything below it).

So a plain path names one folder, not its subtree: `/srv/shop` covers
`/srv/shop` only; `/srv/shop/**` covers it and all below. `**` anywhere else in
a component (`/srv/a**`) is two `*`, within the component.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from functools import cache

from mailui4agents.domain.workspaces import WorkspaceError, normalise_workspace

MAX_ROOTS = 50
"""Most roots one agent (or one bridge) may have."""


class RootError(ValueError):
    """A root that cannot be used (the message says why)."""


def normalise_root(root: str) -> str:
    """`root` in the one spelling it is stored and matched in.

    Absolute POSIX paths only; `.`, `..`, repeated and trailing slashes resolved
    lexically, as workspaces are (`/srv/a/../b` is `/srv/b`)."""
    if not root or not root.startswith("/"):
        raise RootError(f"'{root}' must be an absolute path (it may hold * ? [] and **)")
    try:
        return normalise_workspace(root)
    except WorkspaceError as e:
        raise RootError(f"'{root[:80]}' {e}") from None


def normalise_roots(roots: Iterable[str]) -> list[str]:
    """Each root normalised, duplicates dropped, order kept; RootError past MAX_ROOTS."""
    out = list(dict.fromkeys(normalise_root(r) for r in roots))
    if len(out) > MAX_ROOTS:
        raise RootError(f"at most {MAX_ROOTS} workspace roots (got {len(out)})")
    return out


def is_glob(path: str) -> bool:
    """Does the root hold a wildcard (so it names no single folder)?"""
    return any(c in path for c in "*?[")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


@cache
def _compiled(root: str) -> tuple[str, ...]:
    return _parts(root)


def _match(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    # Dynamic programming over (pattern index, path index): linear in their
    # product, whatever the number of `**` (no exponential backtracking).
    n, m = len(pattern), len(parts)
    reach = [[False] * (m + 1) for _ in range(n + 1)]
    reach[0][0] = True
    for i in range(n):
        star = pattern[i] == "**"
        for j in range(m + 1):
            if not reach[i][j]:
                continue
            if star:
                for k in range(j, m + 1):  # `**` takes zero or more components
                    reach[i + 1][k] = True
            elif j < m and fnmatchcase(parts[j], pattern[i]):
                reach[i + 1][j + 1] = True
    return reach[n][m]


def root_matches(root: str, workspace: str) -> bool:
    """Does the (normalised) `root` cover the absolute `workspace`?"""
    if not workspace.startswith("/"):
        return False  # a relative or Windows path is under no POSIX root
    path = posixpath.normpath(workspace)
    if ".." in path.split("/"):
        return False
    return _match(_compiled(root), _parts(path))


def allowed(roots: Iterable[str], workspace: str) -> bool:
    """Is `workspace` under one of `roots`? No roots: nowhere."""
    return any(root_matches(r, workspace) for r in roots)
