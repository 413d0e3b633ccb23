"""The bridge's own workspace roots: where its turns may run, whatever the gateway said
(docs/bridge.md, "Workspace roots").

The gateway checks an agent's roots lexically — it never sees this machine's disk.
The bridge checks its own roots again before a turn, on the workspace as it really
is here: the path resolved with ``os.path.realpath``, so a symlink inside a root
that points elsewhere is judged by where it points. Matching is the gateway's
(``domain/roots.py``): ``*`` within one component, ``**`` any depth, a plain path
that folder only.

Default: the bridge user's home and everything below it (``$HOME/**``), never
``/``: a bridge whose home is ``/`` (or unknown) must be given its roots.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from mailui4agents.domain.roots import RootError, allowed, is_glob, normalise_root, normalise_roots


def default_roots(home: str | None = None) -> list[str]:
    """``HOME/**`` (the home resolved); RootError when the home is ``/`` or unknown."""
    where = home if home is not None else os.path.expanduser("~")
    if not where.startswith("/"):
        raise RootError(
            "the bridge user has no home directory to default to: pass --workspace-root"
        )
    real = os.path.realpath(where)
    if real == "/":
        raise RootError(
            "the bridge user's home is '/', and the default workspace root is never the "
            "whole machine: pass --workspace-root (e.g. '/srv/*')"
        )
    return normalise_roots([f"{real}/**"])


def resolved_root(root: str) -> str:
    """``root`` with its literal leading folders resolved (``/tmp/x/*`` →
    ``/private/tmp/x/*`` where ``/tmp`` is a symlink), so a workspace resolved with
    realpath can match it. The part from the first wildcard on is kept as written."""
    parts = [p for p in root.split("/") if p]
    fixed = 0
    while fixed < len(parts) and not is_glob(parts[fixed]):
        fixed += 1
    prefix = os.path.realpath("/" + "/".join(parts[:fixed]))
    return posixpath.join(prefix, *parts[fixed:]) if fixed < len(parts) else prefix


def is_broad(root: str) -> bool:
    """A root whose first component is a wildcard (``/**``, ``/*``, ``/**/src``): it
    covers folders in every top-level folder of the machine, ``/etc`` and ``/root``."""
    parts = [p for p in root.split("/") if p]
    return not parts or is_glob(parts[0])


@dataclass(frozen=True)
class WorkspaceRoots:
    """The roots one bridge matches resolved workspaces against."""

    roots: tuple[str, ...]

    @classmethod
    def from_options(cls, given: Sequence[str], *, home: str | None = None) -> WorkspaceRoots:
        """From ``--workspace-root`` values (none: the default). RootError for an
        unusable root, and for ``/`` alone: a plain path is that folder only, so ``/``
        would allow no workspace but ``/`` itself — ``/**`` is the explicit spelling
        of "anywhere"."""
        roots = normalise_roots(given) if given else default_roots(home)
        if "/" in roots:
            raise RootError(
                "'/' names the root folder only, not the machine: give the folders the "
                "agent works in (e.g. '/srv/*', '/home/ana/src/**'), or '/**' to let the "
                "gateway's roots alone decide (not advised)"
            )
        # Past MAX_ROOTS only by the resolved spellings: those are not the operator's.
        resolved = (normalise_root(resolved_root(r)) for r in roots)
        return cls(tuple(dict.fromkeys([*roots, *resolved])))

    def broad(self) -> list[str]:
        return [r for r in self.roots if is_broad(r)]

    def check(self, workspace: str) -> tuple[str, bool]:
        """The workspace resolved, and whether it is under one of the roots."""
        real = os.path.realpath(workspace)
        return real, allowed(self.roots, real)

    def describe(self) -> str:
        return ", ".join(self.roots)
