"""Files and directories only the gateway's user may read, whatever the umask.

The database holds password hashes, token hashes and every mail; blobs hold
every attachment. With the common umask 022 they were world-readable (0644,
0755). Modes are set explicitly after creating, because the umask can only take
bits away from what `open` and `mkdir` ask for, and a strict umask (0277) would
otherwise leave a directory the gateway cannot write.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents as 0700; existing ones are left alone
    (the data dir's parent is the operator's)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile (another upload, another process)
        os.chmod(d, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Make sure `path` exists as a 0600 file (created empty if missing; an existing
    file is tightened to 0600). SQLite then creates its -wal and -shm files with the
    database file's mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def create_private(path: Path) -> int:
    """Open a new file (it must not exist) for writing, as 0600; returns the fd."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def fsync_path(path: Path) -> None:
    """Flush a file or a directory to disk. A rename is durable only once its
    directory is synced (POSIX); a file system that refuses is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_json(path: Path, data: object) -> None:
    """Write `data` as JSON to `path` atomically, 0600: a temporary file, fsync,
    rename. A crash leaves either the old file or the new one (the bridge's
    session and worktree maps)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    encoded = json.dumps(data, indent=1, sort_keys=True).encode()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, encoded)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object `replace_json` wrote (empty when there is no file or it
    holds no object); ValueError naming `what` when it is not JSON."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: the {what} is not valid JSON ({exc})") from exc
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}
