"""The data dir's lock: how `agentmail restore` knows that a gateway uses a data dir.

Every gateway holds a shared `flock` on `<data_dir>/gateway.lock` from its start
to its end (several replicas on PostgreSQL share one data dir, so the lock is
shared, never exclusive). The kernel drops it when the process ends, however it
ends (a crash or SIGKILL too), so a stale lock cannot outlive its gateway — unlike
a pid file, which stays behind and whose pid may be reused. `agentmail restore`
asks for the exclusive lock without waiting: refused means a gateway runs
(docs/backup.md, "Restore"). flock works between processes of one machine; a
data dir on a network file system shared by several machines is not covered.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mailui4agents.private_files import FILE_MODE

LOCK_FILE = "gateway.lock"


class DataDirBusy(RuntimeError):
    """Another process holds the data dir's lock in a way that excludes this one."""


def _open(data_dir: Path) -> int:
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def hold_shared(data_dir: Path) -> int:
    """Take the gateway's shared lock (the data dir must exist); returns the fd to
    keep open while the gateway runs. DataDirBusy while another process holds
    it exclusively."""
    fd = _open(data_dir)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirBusy(
            f"{data_dir / LOCK_FILE} is held exclusively by another process: "
            "is a restore into this data dir running?"
        ) from None
    return fd


def release(fd: int) -> None:
    os.close(fd)  # closing drops the flock


def in_use(data_dir: Path) -> bool:
    """Whether a gateway holds the data dir's lock now (no lock file: nobody does)."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
