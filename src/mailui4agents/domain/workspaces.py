"""Workspace paths: one spelling per directory.

`/srv/shop`, `/srv//shop/` and `/srv/x/../shop` name one directory; as three
strings they were three workspaces, with three sets of sessions and read scopes.
Paths are normalised lexically (the gateway never sees the agent's disk, so
symlinks are not resolved), and refused when they hold control or format
characters or are absurdly long.
"""

from __future__ import annotations

import ntpath
import posixpath
import re

from mailui4agents.domain.names import refused_character

MAX_WORKSPACE_BYTES = 1024
"""Longest workspace path, UTF-8 bytes (Linux's PATH_MAX is 4096; ours are far shorter)."""

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


class WorkspaceError(ValueError):
    """A workspace path that cannot be used (the message says why)."""


def normalise_workspace(path: str) -> str:
    """`path` with `.`, `..`, repeated and trailing separators resolved; "" stays "".

    Relative paths are normalised too (the caller decides whether they are allowed).
    """
    if not path:
        return ""
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_WORKSPACE_BYTES:
        raise WorkspaceError(f"is {size} bytes; at most {MAX_WORKSPACE_BYTES}")
    for ch in path:
        if ch != " ":  # spaces are fine in paths; the other refused characters are not
            bad = refused_character(ch)
            if bad is not None:
                raise WorkspaceError(f"must not contain {bad}")
    if _DRIVE.match(path):
        return ntpath.normpath(path)
    norm = posixpath.normpath(path)
    # POSIX keeps exactly two leading slashes ("//srv"); for us they are one.
    return "/" + norm.lstrip("/") if norm.startswith("//") else norm
