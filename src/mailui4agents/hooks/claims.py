"""One asker per permission dialog (docs/platforms.md, "Claude Code channels").

Claude Code can ask two of ours about one dialog at the same moment: the
``PermissionRequest`` hook of ``install-hook claude-code --interactive``
(hooks/race.py) and the channel of ``agentmail mcp --channel``
(mcp/channel.py). Both run on this machine as this user, both know the call's
relay key prefix (race.py ``relay_key_prefix``), and the first to create the
claim file for that prefix asks the session's deciders; the other opens no
request. The claim is a file created with ``O_EXCL`` in a private directory,
holding the claimant's pid and the end of its wait; a claim whose process is
gone or whose wait is over counts as free. Standard library only (the hook's
fast path imports it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Mapping

#: How often a hook that lost the claim looks whether it was released.
POLL_S = 0.1


def claim_dir(env: Mapping[str, str]) -> str:
    """``$XDG_RUNTIME_DIR/agentmail-claims``, else ``<tmp>/agentmail-<uid>-claims``:
    created mode 0700; refused (OSError) when it is not this user's own."""
    runtime = env.get("XDG_RUNTIME_DIR")
    base = (
        os.path.join(runtime, "agentmail-claims")
        if runtime and os.path.isdir(runtime)
        else os.path.join(tempfile.gettempdir(), f"agentmail-{os.getuid()}-claims")
    )
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    info = os.lstat(base)
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(base):
        raise OSError(f"{base} is not a private directory of this user")
    return base


def claim_path(env: Mapping[str, str], prefix: str) -> str:
    digest = hashlib.sha256(prefix.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return os.path.join(claim_dir(env), digest)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def held(path: str) -> bool:
    """Whether the claim at ``path`` is held by a live process still waiting."""
    try:
        with open(path, encoding="ascii") as f:
            pid_text, until_text = f.read().split()
        pid, until = int(pid_text), float(until_text)
    except (OSError, ValueError):
        return False
    return until > time.time() and _alive(pid)


def take(env: Mapping[str, str], prefix: str, wait_s: float) -> str | None:
    """Claim the dialog of ``prefix`` for ``wait_s`` seconds: the claim's path,
    or None when another live asker holds it. A stale claim is taken over.
    Raises OSError when the claim directory cannot be used."""
    path = claim_path(env, prefix)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if held(path):
                return None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # stale: its claimant is gone or its wait is over
            continue
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()} {time.time() + wait_s:.3f}")
        return path
    return None


def release(path: str) -> None:
    """Give the claim up (only this process's own)."""
    try:
        with open(path, encoding="ascii") as f:
            mine = f.read().split()[:1] == [str(os.getpid())]
    except OSError:
        return
    if mine:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def wait_released(path: str, until: float) -> bool:
    """Block until the claim at ``path`` is released or stale (True), or the
    monotonic clock passes ``until`` (False)."""
    while time.monotonic() < until:
        if not held(path):
            return True
        time.sleep(POLL_S)
    return not held(path)
