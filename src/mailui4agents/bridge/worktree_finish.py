"""Finishing a session's worktree (docs/review.md, "Merge, discard, keep"): merge
its branch into the branch it came from, discard it, or push it (Open PR).

Every git command goes through bridge/worktrees.git (explicit GIT_DIR, hooks and
fsmonitor off); each answer is an :class:`Outcome` the bridge reports as the
action's status (bridge/work.py).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mailui4agents.bridge.worktrees import (
    FALLBACK_EMAIL,
    FALLBACK_NAME,
    GitError,
    Worktree,
    branch_exists,
    decode_path,
    git,
    git_out,
)


@dataclass(frozen=True)
class Outcome:
    status: Literal["done", "refused", "failed"]
    message: str
    conflicts: tuple[str, ...] = ()


def _identity(cwd: str, env: Mapping[str, str]) -> dict[str, str]:
    """The committer: the repository's own, else the bridge's fallback."""
    extra: dict[str, str] = {}
    for key, var, fallback in (("user.name", "NAME", FALLBACK_NAME),
                               ("user.email", "EMAIL", FALLBACK_EMAIL)):  # fmt: skip
        have = git(["config", "--get", key], cwd=cwd, env=env, check=False).stdout.strip()
        if not have and not os.environ.get(f"GIT_AUTHOR_{var}"):
            extra[f"GIT_AUTHOR_{var}"] = fallback
            extra[f"GIT_COMMITTER_{var}"] = fallback
    return extra


def commit_all(wt: Worktree, message: str) -> bool:
    """Commit everything uncommitted in the worktree; True when there was something."""
    if not wt.run(["status", "--porcelain", "-z", "--untracked-files=normal"]).stdout:
        return False
    wt.run(["add", "-A", "--", "."])
    env = {**wt.env(), **_identity(wt.path, wt.env())}
    git(["commit", "--quiet", "--no-verify", "-m", message], cwd=wt.path, env=env)
    return True


def _checked_out_at(wt: Worktree, branch: str) -> Path | None:
    """The working tree where ``branch`` is checked out, if any."""
    listing = git(["worktree", "list", "--porcelain", "-z"],
                  env={"GIT_DIR": wt.common_dir}).stdout  # fmt: skip
    current: str | None = None
    for item in listing.split(b"\0"):
        text = decode_path(item)
        if text.startswith("worktree "):
            current = text[len("worktree ") :]
        elif text == f"branch refs/heads/{branch}" and current is not None:
            return Path(current)
    return None


def merge(wt: Worktree) -> Outcome:
    """Merge the session's branch into the branch the worktree came from.

    Uncommitted work is committed first. Where the base branch is checked out
    (usually the workspace) the merge runs there, and git itself refuses a dirty
    tree; elsewhere the base ref moves (fast-forward) or gets a merge commit built
    with ``git merge-tree``. Conflicts: ``git merge --abort`` and ``refused`` with
    the paths; nothing is left half-merged."""
    base = wt.base_branch
    if not base:
        return Outcome("refused", f"The worktree of {wt.branch} came from a detached HEAD "
                       f"({wt.base_commit[:7]}): there is no branch to merge into.")  # fmt: skip
    if not branch_exists(Path(wt.common_dir), base):
        return Outcome("refused", f"The base branch {base} no longer exists.")
    commit_all(wt, f"agentmail: uncommitted work of {wt.branch}")
    head = git_out(["rev-parse", "--verify", "HEAD^{commit}"], cwd=wt.path, env=wt.env())
    common_env = {"GIT_DIR": wt.common_dir}
    base_commit = git_out(
        ["rev-parse", "--verify", f"refs/heads/{base}^{{commit}}"], env=common_env
    )
    if git(["merge-base", "--is-ancestor", head, base_commit], env=common_env,
           check=False).returncode == 0:  # fmt: skip
        return Outcome("done", f"Nothing to merge: {base} already contains {wt.branch}.")
    place = _checked_out_at(wt, base)
    message = f"Merge {wt.branch} into {base} (agentmail)"
    if place is not None:
        return _merge_in(place, wt, base, head, message)
    ff = git(["merge-base", "--is-ancestor", base_commit, head], env=common_env, check=False)
    if ff.returncode == 0:
        git(["update-ref", "-m", f"agentmail: fast-forward to {wt.branch}", f"refs/heads/{base}",
             head, base_commit], env=common_env)  # fmt: skip
        return Outcome("done", f"Merged {wt.branch} into {base} (fast-forward to {head[:7]}).")
    tree = git(["merge-tree", "--write-tree", "-z", "--name-only", base_commit, head],
               env=common_env, check=False)  # fmt: skip
    if tree.returncode == 1:
        parts = [decode_path(p) for p in tree.stdout.split(b"\0")]
        # <tree>\0<conflicted paths>\0\0<messages>
        paths: list[str] = []
        for p in parts[1:]:
            if not p:
                break
            if p not in paths:
                paths.append(p)
        return _conflicts(wt, base, paths)
    if tree.returncode != 0:
        raise GitError(["merge-tree"], tree.returncode, tree.stderr.decode("utf-8", "replace"))
    tree_id = decode_path(tree.stdout.split(b"\0")[0]).strip()
    env = {**common_env, **_identity(wt.repo, common_env)}
    merged = git_out(
        ["commit-tree", tree_id, "-p", base_commit, "-p", head, "-m", message], env=env
    )
    git(["update-ref", "-m", message, f"refs/heads/{base}", merged, base_commit], env=common_env)
    return Outcome("done", f"Merged {wt.branch} into {base} (merge commit {merged[:7]}).")


def _merge_in(place: Path, wt: Worktree, base: str, head: str, message: str) -> Outcome:
    env = _identity(str(place), {})
    done = git(["merge", "--no-edit", "--no-verify", "--ff", "-m", message, head],
               cwd=place, env=env, check=False)  # fmt: skip
    if done.returncode == 0:
        after = git_out(["rev-parse", "HEAD"], cwd=place)
        how = "fast-forward" if after == head else f"merge commit {after[:7]}"
        return Outcome("done", f"Merged {wt.branch} into {base} at {place} ({how}).")
    unmerged = git(["diff", "--name-only", "-z", "--diff-filter=U"], cwd=place, check=False)
    paths = [decode_path(p) for p in unmerged.stdout.split(b"\0") if p]
    in_progress = git(["rev-parse", "-q", "--verify", "MERGE_HEAD"], cwd=place, check=False)
    if in_progress.returncode == 0:
        git(["merge", "--abort"], cwd=place, check=False)
    if paths:
        return _conflicts(wt, base, paths)
    said = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
    return Outcome("refused", f"git refused to merge {wt.branch} into {base} at {place}: "
                   f"{said[:3000]}")  # fmt: skip


def _conflicts(wt: Worktree, base: str, paths: list[str]) -> Outcome:
    shown = "\n".join(f"- {p}" for p in paths[:100])
    return Outcome(
        "refused",
        f"Merging {wt.branch} into {base} conflicts in {len(paths)} file(s); nothing was "
        f"merged:\n{shown}",
        tuple(paths[:1000]),
    )


def discard(wt: Worktree) -> Outcome:
    """Remove the worktree (uncommitted work with it) and delete its branch."""
    common_env = {"GIT_DIR": wt.common_dir}
    if Path(wt.path).exists():
        done = git(["worktree", "remove", "--force", "--force", wt.path], env=common_env,
                   cwd=wt.repo if Path(wt.repo).is_dir() else None, check=False)  # fmt: skip
        if done.returncode != 0:
            shutil.rmtree(wt.path, ignore_errors=True)
    git(["worktree", "prune"], env=common_env, check=False)
    if branch_exists(Path(wt.common_dir), wt.branch):
        git(["branch", "-D", wt.branch], env=common_env)
    if Path(wt.path).exists():
        return Outcome("failed", f"Could not remove {wt.path}.")
    return Outcome("done", f"Removed the worktree {wt.path} and the branch {wt.branch}.")


# -- Open PR: push the branch ------------------------------------------------------------

_REMOTE_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,254}$")
_HOSTED = re.compile(r"^https://(?P<host>github\.com|gitlab\.com)/(?P<repo>[^?#\s]+?)(?:\.git)?/?$")


def remote_of(wt: Worktree) -> str | None:
    """The remote the session's branch can be pushed to: the one the base branch
    tracks, else ``origin`` when it exists, else None (no "Open PR")."""
    env = {"GIT_DIR": wt.common_dir}
    names = set(git_out(["remote"], env=env).split())
    if wt.base_branch:
        tracked = git(["config", "--get", f"branch.{wt.base_branch}.remote"], env=env,
                      check=False).stdout.decode("utf-8", "replace").strip()  # fmt: skip
        if tracked in names and _REMOTE_NAME.match(tracked):
            return tracked
    return "origin" if "origin" in names else None


def compare_url(remote_url: str, base: str, branch: str) -> str | None:
    """The web page that opens the pull (merge) request, for a GitHub or GitLab
    https remote; None for any other."""
    m = _HOSTED.match(remote_url.strip())
    if m is None:
        return None
    repo = m.group("repo")
    if m.group("host") == "github.com":
        return f"https://github.com/{repo}/compare/{base}...{branch}?expand=1"
    query = f"merge_request[source_branch]={branch}&merge_request[target_branch]={base}"
    return f"https://gitlab.com/{repo}/-/merge_requests/new?{query}"


def push(wt: Worktree, remote: str) -> Outcome:
    """Commit what is uncommitted (as :func:`merge` does), then ``git push <remote>
    <branch>``: no hooks (the safe config), no credential prompt. ``done`` names the
    command that opens the pull request; ``failed`` carries git's words."""
    if not _REMOTE_NAME.match(remote):
        return Outcome("refused", f"{remote!r} is not a remote name.")
    commit_all(wt, f"agentmail: uncommitted work of {wt.branch}")
    # No ssh password prompt either: BatchMode, unless the owner set their own ssh
    # command (the environment's would override the repository's core.sshCommand).
    env = wt.env()
    own_ssh = git(["config", "--get", "core.sshCommand"], env={"GIT_DIR": wt.common_dir},
                  check=False).stdout.strip()  # fmt: skip
    if not os.environ.get("GIT_SSH_COMMAND") and not own_ssh:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    ref = f"refs/heads/{wt.branch}"
    done = wt.run(["-c", "protocol.ext.allow=never", "push", "--porcelain", "--no-verify",
                   remote, f"{ref}:{ref}"], env=env, check=False)  # fmt: skip
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
        return Outcome("failed", f"git push {remote} {wt.branch} failed: {said[:3000]}")
    base = wt.base_branch or "<base branch>"
    lines = [f"Pushed {wt.branch} to {remote}. Open the pull request with:",
             f"gh pr create --base {base} --head {wt.branch}"]  # fmt: skip
    # The URL as configured (``get-url`` would apply ``insteadOf`` rewrites).
    url = git(["config", "--get", f"remote.{remote}.url"], env={"GIT_DIR": wt.common_dir},
              check=False)  # fmt: skip
    page = compare_url(url.stdout.decode("utf-8", "replace"), base, wt.branch)
    if page is not None:
        lines.append(f"or on the web: {page}")
    return Outcome("done", "\n".join(lines))
