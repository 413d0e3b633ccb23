"""A git worktree per mail session, and what each turn changed (docs/review.md).

Everything here is ``git`` subprocesses (no library), synchronous: the bridge
calls it from a worker thread. The pieces:

- :func:`find_repo`: is the workspace a git repository with a commit?
- :func:`create`: the session's worktree under the bridge's own folder, on a new
  branch ``agentmail/<alias>`` from the workspace's current ``HEAD``.
- :func:`snapshot`: the HEAD commit plus a tree of the whole working state
  (untracked files too), written through a *temporary* index file — the
  worktree's real index is never touched, so the agent's staging survives.
- :func:`diff`: what changed between two snapshots: the files (``work.json``),
  ``git diff --stat`` and the patch, cut at a size limit.
- :func:`status` and :func:`sweep_decision`; finishing (merge, discard, Open PR's
  push) is bridge/worktree_finish.py.

Git is run with an explicit ``GIT_DIR``/``GIT_WORK_TREE`` (never discovered
from a ``.git`` file the agent could rewrite), hooks off and fsmonitor off: the
agent writes in the worktree, and nothing it writes there may make the bridge —
which runs unconfined — execute a program.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from mailui4agents.bridge.replies import SUBJECT_MAX_BYTES, clamp_utf8
from mailui4agents.private_files import read_json_object, replace_json

GIT_TIMEOUT_S = 300.0
#: ``work.json`` lists at most this many files; past it ``files_truncated``.
MAX_FILES = 5000
#: The ``--stat`` part of a work mail's body (the rest is in ``work.json``).
STAT_MAX_BYTES = 64 * 1024
DEFAULT_DIFF_MAX_BYTES = 1024 * 1024
BRANCH_PREFIX = "agentmail/"
#: Config every bridge git command runs with: no hooks, no fsmonitor, no pager,
#: no external diff or textconv programs.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "diff.external=",
    "color.ui=false",
    "advice.detachedHead=false",
)
#: The identity of the bridge's own commits when the repository has none configured.
FALLBACK_NAME = "agentmail bridge"
FALLBACK_EMAIL = "agentmail-bridge@localhost"
_SCRUBBED_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES", "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
)  # fmt: skip


class GitError(RuntimeError):
    """A git command failed; ``stderr`` is git's own words."""

    def __init__(self, argv: Sequence[str], code: int, stderr: str) -> None:
        self.argv = list(argv)
        self.code = code
        self.stderr = stderr.strip()
        super().__init__(f"git {' '.join(argv[:3])}: exit {code}: {self.stderr[:500]}")


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANGUAGE="C", GIT_OPTIONAL_LOCKS="0")
    if extra:
        env.update(extra)
    return env


def git(
    args: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """One git command; raises :class:`GitError` on a non-zero exit when ``check``."""
    argv = ["git"]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    argv += list(args)
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=_env(env),
        input=input,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise GitError(list(args), done.returncode, done.stderr.decode("utf-8", "replace"))
    return done


def git_out(args: Sequence[str], **kwargs: Any) -> str:
    return git(args, **kwargs).stdout.decode("utf-8", "surrogateescape").strip()


# -- the repository ----------------------------------------------------------------------


@dataclass(frozen=True)
class Repo:
    """The git repository a workspace lies in."""

    toplevel: Path  # the workspace's working tree root
    common_dir: Path  # the shared .git (objects, refs, config)
    head: str  # 40 hex
    branch: str | None  # the checked-out branch; None: detached HEAD
    subdir: str  # the workspace relative to ``toplevel`` ("" at the top)


def find_repo(workspace: Path) -> Repo | None:
    """The repository of ``workspace``, or None when it is none or has no commit."""
    done = git(
        ["rev-parse", "--show-toplevel", "--git-common-dir", "--show-prefix"],
        cwd=workspace,
        check=False,
    )
    if done.returncode != 0:
        return None
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 2 or not lines[0]:
        return None  # a bare repository or inside .git
    toplevel = Path(lines[0])
    common = Path(lines[1])
    if not common.is_absolute():
        common = (workspace / common).resolve()
    prefix = lines[2].rstrip("/") if len(lines) > 2 else ""
    head = git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], cwd=toplevel, check=False)
    if head.returncode != 0:
        return None  # no commit yet
    branch = git(["symbolic-ref", "-q", "--short", "HEAD"], cwd=toplevel, check=False)
    return Repo(
        toplevel=toplevel,
        common_dir=common,
        head=head.stdout.decode().strip(),
        branch=branch.stdout.decode().strip() or None if branch.returncode == 0 else None,
        subdir=prefix,
    )


def workspace_hash(toplevel: Path) -> str:
    return hashlib.sha256(str(toplevel).encode()).hexdigest()[:12]


_BRANCH_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def branch_name(alias: str | None, session_id: str) -> str:
    """``agentmail/<alias>`` (or the first 8 of the session id), a valid ref name."""
    stem = _BRANCH_BAD.sub("-", alias or "").strip(".-")[:80].rstrip(".-")
    if not stem or stem.endswith(".lock") or ".." in stem:
        stem = _BRANCH_BAD.sub("-", session_id)[:8] or "session"
    return BRANCH_PREFIX + stem


# -- one session's worktree --------------------------------------------------------------


@dataclass
class Worktree:
    """What the bridge keeps of a session's worktree (``worktrees.json``)."""

    session_id: str
    repo: str  # the workspace's toplevel
    common_dir: str
    git_dir: str  # the worktree's own admin folder (<common>/worktrees/<name>)
    path: str
    branch: str
    base_branch: str | None
    base_commit: str
    subdir: str = ""
    state: Literal["active", "removed"] = "active"
    created_at: float = field(default_factory=time.time)
    #: When the bridge first saw the session archived (the retention clock).
    archived_at: float | None = None
    #: When an owner last chose Keep (restarts the clock).
    kept_at: float | None = None
    #: The owner was asked (once per clock): no second ask.
    asked_at: float | None = None
    #: Mail id → the "before" snapshot (HEAD, tree) of a turn not settled yet: a
    #: retried or interrupted turn's work mail still shows what every attempt changed.
    pending: dict[str, list[str]] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """GIT_DIR/GIT_WORK_TREE: this worktree, whatever its ``.git`` file says."""
        return {"GIT_DIR": self.git_dir, "GIT_WORK_TREE": self.path}

    def cwd(self) -> Path:
        """Where the turn runs: the workspace's place inside the worktree."""
        here = Path(self.path) / self.subdir if self.subdir else Path(self.path)
        return here if here.is_dir() else Path(self.path)

    def run(self, args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        env = dict(kwargs.pop("env", None) or {})
        return git(args, cwd=self.path, env={**self.env(), **env}, **kwargs)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Worktree:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def branch_exists(common_dir: Path, name: str) -> bool:
    done = git(
        ["show-ref", "--verify", "-q", f"refs/heads/{name}"],
        env={"GIT_DIR": str(common_dir)},
        check=False,
    )
    return done.returncode == 0


def create(repo: Repo, root: Path, session_id: str, alias: str | None) -> Worktree:
    """A new worktree for the session at ``root/<workspace hash>/<session id>``, on a
    new branch from the workspace's HEAD (``-2``, ``-3`` … when the name is taken)."""
    base = branch_name(alias, session_id)
    name, n = base, 1
    while branch_exists(repo.common_dir, name):
        n += 1
        name = f"{base}-{n}"
    path = root / workspace_hash(repo.toplevel) / session_id
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {"GIT_DIR": str(repo.common_dir)}
    add = ["worktree", "add", "--quiet", "-b", name, str(path), repo.head]
    try:
        git(add, cwd=repo.toplevel, env=env)
    except GitError as exc:
        if "already registered" not in exc.stderr:
            raise
        # A worktree folder removed by hand is still registered: forget it and try
        # once more (git had made the branch already: it did not exist before).
        git(["worktree", "prune"], env=env, check=False)
        git(["branch", "-D", name], env=env, check=False)
        git(add, cwd=repo.toplevel, env=env)
    git_dir = git_out(["rev-parse", "--absolute-git-dir"], cwd=path)
    return Worktree(
        session_id=session_id,
        repo=str(repo.toplevel),
        common_dir=str(repo.common_dir),
        git_dir=git_dir,
        path=str(path),
        branch=name,
        base_branch=repo.branch,
        base_commit=repo.head,
        subdir=repo.subdir,
    )


# -- snapshots and the turn's diff -------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    head: str  # the HEAD commit
    tree: str  # a tree of the whole working state (untracked files too)


def snapshot(wt: Worktree) -> Snapshot:
    """HEAD plus a tree of everything in the worktree that git would add.

    Through a temporary copy of the worktree's index (so files whose stat did not
    change are not hashed again); the real index is never written."""
    head = git_out(["rev-parse", "--verify", "HEAD^{commit}"], cwd=wt.path, env=wt.env())
    real_index = Path(wt.git_dir) / "index"
    with tempfile.TemporaryDirectory(prefix="agentmail-snap-") as scratch:
        index = Path(scratch) / "index"
        with contextlib.suppress(FileNotFoundError):
            shutil.copyfile(real_index, index)
        env = {**wt.env(), "GIT_INDEX_FILE": str(index)}
        git(["add", "-A", "--", "."], cwd=wt.path, env=env)
        tree = git_out(["write-tree"], cwd=wt.path, env=env)
    return Snapshot(head=head, tree=tree)


FileStatus = Literal["added", "modified", "deleted", "renamed"]
_STATUS: dict[str, FileStatus] = {"A": "added", "M": "modified", "D": "deleted",
                                   "R": "renamed", "T": "modified", "C": "added"}  # fmt: skip


@dataclass(frozen=True)
class FileChange:
    path: str
    old_path: str | None
    status: FileStatus
    added: int | None  # None: binary
    deleted: int | None
    binary: bool


@dataclass
class TurnDiff:
    wt_branch: str
    wt_path: str
    base_branch: str | None
    before: Snapshot
    after: Snapshot
    files: list[FileChange]
    stat: str
    patch: bytes | None  # None: capped
    patch_bytes: int
    max_bytes: int
    #: At most this many entries in work.json (halved when it is too large).
    file_limit: int = MAX_FILES

    @property
    def capped(self) -> bool:
        return self.patch is None

    @property
    def empty(self) -> bool:
        return not self.files and self.before.head == self.after.head

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def deleted(self) -> int:
        return sum(f.deleted or 0 for f in self.files)

    def work_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": 1,
            "branch": self.wt_branch,
            "path": self.wt_path,
            "base_branch": self.base_branch,
            "from_commit": self.before.head,
            "to_commit": self.after.head,
            "capped": self.capped,
            "patch_bytes": self.patch_bytes,
            "files": [asdict(f) for f in self.files[: self.file_limit]],
        }
        if len(self.files) > self.file_limit:
            data["files_truncated"] = True
        return data

    def subject(self, original: str) -> str:
        n = len(self.files)
        files = f"{n} file{'' if n == 1 else 's'}"
        text = f"Work: {files} changed (+{self.added} −{self.deleted}) — {original}"
        return clamp_utf8(text, SUBJECT_MAX_BYTES)

    def body(self) -> str:
        if self.before.head == self.after.head:
            commits = "no commits"
        else:
            commits = f"commits {self.before.head[:7]}..{self.after.head[:7]}"
        lines = [f"Branch {self.wt_branch}, {commits}", "", self.stat.rstrip("\n")]
        if self.capped:
            lines += [
                "",
                f"The patch ({self.patch_bytes} bytes) is past the limit of {self.max_bytes} "
                "bytes: only the summary is attached.",
            ]
        return "\n".join(lines) + "\n"


def _files(wt: Worktree, a: str, b: str) -> list[FileChange]:
    names = git(["diff-tree", "-r", "-M", "-z", "--name-status", a, b],
                cwd=wt.path, env=wt.env()).stdout  # fmt: skip
    nums = git(["diff-tree", "-r", "-M", "-z", "--numstat", a, b],
               cwd=wt.path, env=wt.env()).stdout  # fmt: skip
    counts: dict[str, tuple[int | None, int | None]] = {}
    parts = nums.split(b"\0")
    i = 0
    while i < len(parts) and parts[i]:
        added, deleted, rest = parts[i].split(b"\t", 2)
        if rest:  # a plain path
            path = rest
            i += 1
        else:  # a rename: old and new path follow
            path = parts[i + 2]
            i += 3
        counts[decode_path(path)] = (
            None if added == b"-" else int(added),
            None if deleted == b"-" else int(deleted),
        )
    files: list[FileChange] = []
    parts = names.split(b"\0")
    i = 0
    while i < len(parts) and parts[i]:
        letter = parts[i][:1].decode()
        if letter in ("R", "C"):
            old, new = decode_path(parts[i + 1]), decode_path(parts[i + 2])
            i += 3
        else:
            old, new = None, decode_path(parts[i + 1])
            i += 2
        status = _STATUS.get(letter, "modified")
        if letter == "C":
            old = None
        added_n, deleted_n = counts.get(new, (0, 0))
        binary = added_n is None
        files.append(FileChange(new, old if status == "renamed" else None, status,
                                added_n, deleted_n, binary))  # fmt: skip
    return files


def decode_path(path: bytes) -> str:
    return path.decode("utf-8", "replace")


def _patch(wt: Worktree, a: str, b: str, max_bytes: int) -> tuple[bytes | None, int]:
    """The unified patch, or None past ``max_bytes`` (its whole size is still
    counted, streamed and dropped)."""
    argv = ["git"]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    argv += ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", a, b]
    kept = bytearray()
    total = 0
    with subprocess.Popen(
        argv, cwd=wt.path, env=_env(wt.env()), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 16):
            total += len(chunk)
            if total <= max_bytes:
                kept += chunk
        err = proc.stderr.read() if proc.stderr else b""
        code = proc.wait()
    if code != 0:
        raise GitError(argv[1:], code, err.decode("utf-8", "replace"))
    return (bytes(kept) if total <= max_bytes else None), total


def diff(wt: Worktree, before: Snapshot, after: Snapshot, max_bytes: int) -> TurnDiff:
    """What the turn changed: the two snapshots' trees compared, committed and
    uncommitted work alike; the commit range is the two HEADs."""
    files = _files(wt, before.tree, after.tree)
    stat = ""
    if files:
        stat = git(
            ["diff", "--no-color", "--stat=100", "--stat-count=2000", "-M", before.tree,
             after.tree], cwd=wt.path, env=wt.env(),
        ).stdout.decode("utf-8", "replace")  # fmt: skip
        if len(stat.encode()) > STAT_MAX_BYTES:
            stat = stat.encode()[:STAT_MAX_BYTES].decode("utf-8", "ignore")
            stat = stat[: stat.rfind("\n") + 1] + " … (the whole list is in work.json)\n"
    patch: bytes | None = b""
    total = 0
    if files:
        patch, total = _patch(wt, before.tree, after.tree, max_bytes)
    return TurnDiff(
        wt_branch=wt.branch,
        wt_path=wt.path,
        base_branch=wt.base_branch,
        before=before,
        after=after,
        files=files,
        stat=stat,
        patch=patch,
        patch_bytes=total,
        max_bytes=max_bytes,
    )


# -- the worktree's state ----------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    head: str
    dirty: bool
    unmerged: int  # commits on the branch not in base
    unpushed: int  # of them, also on no remote branch
    bytes: int


def _base_ref(wt: Worktree) -> str:
    if wt.base_branch and branch_exists(Path(wt.common_dir), wt.base_branch):
        return f"refs/heads/{wt.base_branch}"
    return wt.base_commit


def status(wt: Worktree) -> Status:
    head = git_out(["rev-parse", "--verify", "HEAD^{commit}"], cwd=wt.path, env=wt.env())
    porcelain = wt.run(["status", "--porcelain", "-z", "--untracked-files=normal"]).stdout
    base = _base_ref(wt)
    unmerged = int(
        git_out(["rev-list", "--count", "HEAD", "--not", base], cwd=wt.path, env=wt.env())
    )
    unpushed = unmerged
    if unmerged:
        unpushed = int(git_out(["rev-list", "--count", "HEAD", "--not", base, "--remotes"],
                            cwd=wt.path, env=wt.env()))  # fmt: skip
    return Status(head=head, dirty=bool(porcelain), unmerged=unmerged, unpushed=unpushed,
                  bytes=disk_use(Path(wt.path)))  # fmt: skip


def disk_use(root: Path) -> int:
    """Bytes on disk under ``root`` like ``du`` (blocks, hard links once, symlinks not
    followed); the shared object store is elsewhere and not counted."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_nlink > 1:
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total


# -- retention ---------------------------------------------------------------------------

Decision = Literal["keep", "remove", "ask"]


def sweep_decision(wt: Worktree, st: Status | None, now: float, retention_s: float) -> Decision:
    """What the retention sweep does with a worktree.

    Kept while the session is not archived, with retention 0, and until the
    retention has passed since it was archived (or since an owner chose Keep).
    After that only a clean worktree is removed — nothing uncommitted and no
    commit outside the base branch and every remote branch; any other is never
    removed: the owner is asked."""
    if wt.state != "active" or wt.archived_at is None or retention_s <= 0:
        return "keep"
    start = max(wt.archived_at, wt.kept_at or 0.0)
    if now < start + retention_s:
        return "keep"
    if st is None or st.dirty or st.unpushed:
        return "ask"
    return "remove"


def ask_reason(st: Status | None) -> str:
    if st is None:
        return "its state could not be read"
    parts = []
    if st.dirty:
        parts.append("it has uncommitted changes")
    if st.unpushed:
        parts.append(f"{st.unpushed} commit(s) are neither merged nor pushed")
    return " and ".join(parts) or "it is not clean"


# -- the bridge's record -----------------------------------------------------------------


@dataclass
class WorktreeMap:
    """``worktrees.json``: session id → :class:`Worktree`, replaced atomically."""

    path: Path
    items: dict[str, Worktree] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> WorktreeMap:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = read_json_object(path, "worktree map")
        return cls(path, {k: Worktree.from_json(v) for k, v in data.items() if isinstance(v, dict)})

    def get(self, session_id: str) -> Worktree | None:
        return self.items.get(session_id)

    def put(self, wt: Worktree) -> None:
        self.items[wt.session_id] = wt
        self.save()

    def save(self) -> None:
        replace_json(self.path, {k: v.as_json() for k, v in self.items.items()})
