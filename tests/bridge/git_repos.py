"""Real git repositories for the worktree tests (bridge/worktrees.py, docs/review.md):
`git` in a folder, and a repository on `main` with one commit of the given files."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """One git command in `cwd`; its output without the trailing newline."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def init_repo(
    root: Path, files: Mapping[str, str], *, name: str = "Tester", email: str = "tester@example.org"
) -> Path:
    """`root` as a repository on `main` whose one commit ("start") holds `files`."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", name)
    git(root, "config", "user.email", email)
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root
