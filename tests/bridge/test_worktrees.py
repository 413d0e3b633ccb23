"""The git mechanics of a session's worktree (bridge/worktrees.py, docs/review.md),
against real repositories made here with the real ``git``."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from mailui4agents.bridge import worktree_finish as finish
from mailui4agents.bridge import worktrees as w
from tests.bridge.git_repos import git, init_repo

pytestmark = pytest.mark.e2e  # starts git processes


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(
        tmp_path / "project",
        {"a.txt": "one\ntwo\nthree\n", "b.txt": "bee\n", "src/c.py": "print('c')\n"},
    )


def make(repo: Path, tmp_path: Path, session: str, alias: str | None = None) -> w.Worktree:
    found = w.find_repo(repo)
    assert found is not None
    return w.create(found, tmp_path / "state" / "worktrees", session, alias)


def turn(wt: w.Worktree, change: object, max_bytes: int = 1 << 20) -> w.TurnDiff:
    before = w.snapshot(wt)
    change()  # type: ignore[operator]
    return w.diff(wt, before, w.snapshot(wt), max_bytes)


def test_find_repo_needs_a_repository_with_a_commit(tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert w.find_repo(plain) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert w.find_repo(empty) is None
    found = w.find_repo(repo / "src")
    assert found is not None
    assert found.toplevel == repo and found.branch == "main" and found.subdir == "src"
    assert len(found.head) == 40
    git(repo, "checkout", "-q", "--detach")
    detached = w.find_repo(repo)
    assert detached is not None and detached.branch is None


def test_create_names_branch_and_folder(tmp_path: Path, repo: Path) -> None:
    one = make(repo, tmp_path, "0123456789abcdef", "fix-login")
    assert one.branch == "agentmail/fix-login"
    assert one.path == str(
        tmp_path / "state" / "worktrees" / w.workspace_hash(repo) / "0123456789abcdef"
    )
    assert one.base_branch == "main" and one.base_commit == git(repo, "rev-parse", "HEAD")
    assert git(Path(one.path), "rev-parse", "--abbrev-ref", "HEAD") == "agentmail/fix-login"
    two = make(repo, tmp_path, "fedcba9876543210", "fix-login")
    assert two.branch == "agentmail/fix-login-2"
    three = make(repo, tmp_path, "aaaabbbbccccdddd", None)
    assert three.branch == "agentmail/aaaabbbb"
    for odd in ("../x y..lock", "a b/c", "-.-", "é", "x" * 300):
        name = w.branch_name(odd, "12345678abc")
        git(repo, "check-ref-format", "--branch", name)  # a valid branch name
    assert w.branch_name("-.-", "12345678abc") == "agentmail/12345678"


def test_two_sessions_on_one_repository_do_not_touch_each_others_files(
    tmp_path: Path, repo: Path
) -> None:
    one = make(repo, tmp_path, "s1111111", "one")
    two = make(repo, tmp_path, "s2222222", "two")
    d1 = turn(one, lambda: (Path(one.path) / "a.txt").write_text("changed by one\n"))
    d2 = turn(two, lambda: (Path(two.path) / "new.txt").write_text("by two\n"))
    assert [f.path for f in d1.files] == ["a.txt"]
    assert [f.path for f in d2.files] == ["new.txt"]
    assert (Path(two.path) / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert not (Path(one.path) / "new.txt").exists()
    assert (repo / "a.txt").read_text() == "one\ntwo\nthree\n"  # the workspace: untouched
    assert not (repo / "new.txt").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_each_turn_has_exactly_its_changes_committed_and_uncommitted(
    tmp_path: Path, repo: Path
) -> None:
    wt = make(repo, tmp_path, "s3333333", "turns")
    root = Path(wt.path)

    def turn1() -> None:
        (root / "a.txt").write_text("one\nTWO\nthree\n")
        git(root, "commit", "-q", "-am", "agent commit")  # committed
        (root / "src" / "d.py").write_text("print('d')\n")  # uncommitted, untracked

    d1 = turn(wt, turn1)
    assert sorted((f.path, f.status, f.added, f.deleted) for f in d1.files) == [
        ("a.txt", "modified", 1, 1),
        ("src/d.py", "added", 1, 0),
    ]
    assert d1.before.head != d1.after.head
    assert d1.body().startswith(f"Branch agentmail/turns, commits {d1.before.head[:7]}..")
    assert "a.txt" in d1.body() and "src/d.py" in d1.body()
    assert d1.patch is not None and b"+TWO" in d1.patch and b"+print('d')" in d1.patch
    assert d1.subject("Fix it") == "Work: 2 files changed (+2 −1) — Fix it"

    d2 = turn(wt, lambda: (root / "b.txt").write_text("bee\nsecond\n"))
    assert [(f.path, f.added, f.deleted) for f in d2.files] == [("b.txt", 1, 0)]
    assert d2.before.head == d2.after.head
    assert d2.body().startswith("Branch agentmail/turns, no commits\n")
    assert d2.patch is not None and b"src/d.py" not in d2.patch and b"a.txt" not in d2.patch

    d3 = turn(wt, lambda: None)
    assert d3.empty and d3.files == []


def test_snapshot_never_touches_the_real_index(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s4444444", "index")
    root = Path(wt.path)
    (root / "a.txt").write_text("staged\n")
    git(root, "add", "a.txt")
    (root / "b.txt").write_text("not staged\n")
    (root / "untracked.txt").write_text("u\n")
    index = Path(wt.git_dir) / "index"
    before = hashlib.sha256(index.read_bytes()).hexdigest(), index.stat().st_mtime_ns
    snap = w.snapshot(wt)
    assert (hashlib.sha256(index.read_bytes()).hexdigest(), index.stat().st_mtime_ns) == before
    assert git(root, "diff", "--cached", "--name-only") == "a.txt"
    assert "untracked.txt" in git(root, "ls-tree", "-r", "--name-only", snap.tree)


def test_binary_named_not_dumped_and_renames(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s5555555", "bin")
    root = Path(wt.path)
    secret = b"\x00\x01BINARYSECRET\xff" * 100

    def change() -> None:
        (root / "blob.bin").write_bytes(secret)
        (root / "src" / "c.py").rename(root / "src" / "renamed.py")

    d = turn(wt, change)
    by_path = {f.path: f for f in d.files}
    assert by_path["blob.bin"].binary and by_path["blob.bin"].added is None
    assert by_path["src/renamed.py"].status == "renamed"
    assert by_path["src/renamed.py"].old_path == "src/c.py"
    assert d.patch is not None
    assert b"Binary files /dev/null and b/blob.bin differ" in d.patch
    assert b"BINARYSECRET" not in d.patch
    data = d.work_json()
    assert data["files"][0].keys() == {"path", "old_path", "status", "added", "deleted", "binary"}
    assert data["capped"] is False and data["patch_bytes"] == len(d.patch)


def test_a_50_mb_diff_is_capped_and_the_mail_says_so(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s6666666", "huge")
    line = b"x" * 99 + b"\n"
    started = time.perf_counter()
    d = turn(wt, lambda: (Path(wt.path) / "huge.txt").write_bytes(line * 500_000), 1 << 20)
    seconds = time.perf_counter() - started
    assert d.capped and d.patch is None
    assert d.patch_bytes > 50_000_000
    assert f"The patch ({d.patch_bytes} bytes) is past the limit of 1048576 bytes" in d.body()
    assert d.work_json()["capped"] is True
    assert [(f.path, f.added) for f in d.files] == [("huge.txt", 500_000)]
    print(f"50 MB turn: snapshot+diff {seconds:.2f} s")


def test_a_thousand_files_in_one_turn(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s7777777", "many")

    def change() -> None:
        for i in range(1000):
            (Path(wt.path) / f"f{i:04}.txt").write_text(f"file {i}\n")

    started = time.perf_counter()
    d = turn(wt, change)
    seconds = time.perf_counter() - started
    assert len(d.files) == 1000 and d.added == 1000
    assert len(d.work_json()["files"]) == 1000 and "files_truncated" not in d.work_json()
    assert "1000 files changed" in d.stat
    assert d.subject("x").startswith("Work: 1000 files changed (+1000 −0)")
    print(f"1000 files: snapshot+diff {seconds:.2f} s")


def test_status_dirty_unmerged_and_disk_use(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s8888888", "st")
    root = Path(wt.path)
    st = w.status(wt)
    assert not st.dirty and st.unmerged == 0 and st.bytes > 0
    (root / "big.bin").write_bytes(os.urandom(200_000))
    st = w.status(wt)
    assert st.dirty and st.bytes >= 200_000
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    st = w.status(wt)
    assert not st.dirty and st.unmerged == 1 and st.unpushed == 1


def test_merge_fast_forward_into_the_checked_out_workspace(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s9999999", "ff")
    (Path(wt.path) / "a.txt").write_text("merged\n")  # uncommitted: committed first
    out = finish.merge(wt)
    assert out.status == "done" and "fast-forward" in out.message, out
    assert (repo / "a.txt").read_text() == "merged\n"
    assert git(repo, "rev-parse", "main") == git(Path(wt.path), "rev-parse", "HEAD")
    assert (
        git(repo, "log", "-1", "--format=%s", "main")
        == "agentmail: uncommitted work of agentmail/ff"
    )
    assert w.status(wt).unmerged == 0
    assert finish.merge(wt).message.startswith("Nothing to merge")


def test_merge_commit_when_the_base_moved(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "saaaaaaa", "mc")
    (Path(wt.path) / "b.txt").write_text("from the agent\n")
    (repo / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    git(repo, "commit", "-q", "-am", "meanwhile")
    out = finish.merge(wt)
    assert out.status == "done" and "merge commit" in out.message, out
    assert git(repo, "rev-list", "--parents", "-n1", "main").count(" ") == 2  # two parents
    assert (repo / "b.txt").read_text() == "from the agent\n"
    assert (repo / "a.txt").read_text().endswith("four\n")


def test_merge_conflict_is_refused_with_the_paths_and_aborted(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "sbbbbbbb", "cf")
    (Path(wt.path) / "a.txt").write_text("agent's line\n")
    (repo / "a.txt").write_text("human's line\n")
    git(repo, "commit", "-q", "-am", "human")
    human = git(repo, "rev-parse", "main")
    out = finish.merge(wt)
    assert out.status == "refused" and out.conflicts == ("a.txt",), out
    assert "a.txt" in out.message and "conflicts" in out.message
    assert git(repo, "rev-parse", "main") == human
    assert git(repo, "status", "--porcelain") == ""  # aborted: no half merge
    assert not (Path(git(repo, "rev-parse", "--absolute-git-dir")) / "MERGE_HEAD").exists()


def test_merge_into_a_branch_checked_out_nowhere(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "scccccccc", "away")
    git(repo, "checkout", "-q", "-b", "elsewhere")  # main is checked out nowhere now
    (Path(wt.path) / "b.txt").write_text("ff\n")
    assert finish.merge(wt).message.startswith("Merged agentmail/away into main (fast-forward")
    assert git(repo, "show", "main:b.txt") == "ff"
    # the base moves on: a merge commit, built without a checkout
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("one\ntwo\nthree\nmore\n")
    git(repo, "commit", "-q", "-am", "more")
    git(repo, "checkout", "-q", "elsewhere")
    (Path(wt.path) / "src" / "c.py").write_text("print('C')\n")
    out = finish.merge(wt)
    assert out.status == "done" and "merge commit" in out.message, out
    assert git(repo, "show", "main:src/c.py") == "print('C')"
    assert git(repo, "show", "main:a.txt").endswith("more")
    # and a conflict there is refused too, the base unmoved
    git(repo, "checkout", "-q", "main")
    (repo / "b.txt").write_text("human\n")
    git(repo, "commit", "-q", "-am", "human b")
    git(repo, "checkout", "-q", "elsewhere")
    (Path(wt.path) / "b.txt").write_text("agent\n")
    before = git(repo, "rev-parse", "main")
    out = finish.merge(wt)
    assert out.status == "refused" and out.conflicts == ("b.txt",), out
    assert git(repo, "rev-parse", "main") == before


def test_merge_refuses_a_detached_base_and_a_dirty_workspace(tmp_path: Path, repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    wt = make(repo, tmp_path, "sdddddddd", "det")
    out = finish.merge(wt)
    assert out.status == "refused" and "detached HEAD" in out.message
    git(repo, "checkout", "-q", "main")
    wt2 = make(repo, tmp_path, "seeeeeeee", "dirty")
    (Path(wt2.path) / "a.txt").write_text("agent\n")
    (repo / "a.txt").write_text("human, not committed\n")
    before = git(repo, "rev-parse", "main")
    out = finish.merge(wt2)
    assert out.status == "refused" and "would be overwritten" in out.message, out
    assert (repo / "a.txt").read_text() == "human, not committed\n"
    assert git(repo, "rev-parse", "main") == before


def test_discard_removes_worktree_and_branch_even_when_dirty(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "sffffffff", "gone")
    (Path(wt.path) / "x.txt").write_text("uncommitted\n")
    out = finish.discard(wt)
    assert out.status == "done", out
    assert not Path(wt.path).exists()
    assert "agentmail/gone" not in git(repo, "branch", "--list")
    assert wt.path not in git(repo, "worktree", "list")


def test_sweep_never_removes_a_dirty_or_unpushed_worktree(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s00000001", "sweep")
    day = 86400.0
    now = time.time()
    clean = w.status(wt)
    assert w.sweep_decision(wt, clean, now, 7 * day) == "keep"  # not archived
    wt.archived_at = now - 8 * day
    assert w.sweep_decision(wt, clean, now, 0) == "keep"  # 0: never
    assert w.sweep_decision(wt, clean, now, 9 * day) == "keep"  # not yet
    assert w.sweep_decision(wt, clean, now, 7 * day) == "remove"
    wt.kept_at = now - day
    assert w.sweep_decision(wt, clean, now, 7 * day) == "keep"  # Keep restarts the clock
    wt.kept_at = None
    (Path(wt.path) / "wip.txt").write_text("uncommitted\n")
    dirty = w.status(wt)
    assert w.sweep_decision(wt, dirty, now, 7 * day) == "ask"
    assert "uncommitted changes" in w.ask_reason(dirty)
    git(Path(wt.path), "add", "-A")
    git(Path(wt.path), "commit", "-q", "-m", "local only")
    local = w.status(wt)
    assert w.sweep_decision(wt, local, now, 7 * day) == "ask"
    assert "1 commit(s) are neither merged nor pushed" in w.ask_reason(local)
    # pushed to a remote: safe to remove
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(Path(wt.path), "push", "-q", "origin", "agentmail/sweep")
    assert w.sweep_decision(wt, w.status(wt), now, 7 * day) == "remove"


def test_the_bridge_never_runs_what_the_agent_wrote(tmp_path: Path, repo: Path) -> None:
    """A hook in the repository, and a worktree whose ``.git`` file the agent pointed at
    a git dir of its own with an fsmonitor program: the bridge's git runs neither."""
    marker = tmp_path / "ran"
    hooks = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "hooks"
    for name in ("post-checkout", "pre-commit", "post-merge", "post-commit"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hooks / name).chmod(0o755)
    wt = make(repo, tmp_path, "s00000002", "safe")
    root = Path(wt.path)
    evil = root / "evil-git"
    git(tmp_path, "init", "-q", str(evil.parent / "evil-src"))
    (evil.parent / "evil-src" / ".git").rename(evil)
    git(tmp_path, "--git-dir", str(evil), "config", "core.fsmonitor", f"echo fsmonitor >> {marker}")
    (root / ".git").write_text(f"gitdir: {evil}\n")
    (root / "a.txt").write_text("changed\n")
    d = w.diff(wt, w.snapshot(wt), w.snapshot(wt), 1 << 20)
    assert d.files == []
    assert finish.merge(wt).status == "done"
    assert not marker.exists()


def test_worktree_map_round_trip(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path, "s00000003", "map")
    wt.archived_at = 123.0
    store = w.WorktreeMap.open(tmp_path / "state" / "worktrees.json")
    store.put(wt)
    again = w.WorktreeMap.open(tmp_path / "state" / "worktrees.json")
    assert again.get("s00000003") == wt
    assert oct((tmp_path / "state" / "worktrees.json").stat().st_mode & 0o777) == "0o600"


def test_a_worktree_folder_removed_by_hand_is_made_again(tmp_path: Path, repo: Path) -> None:
    first = make(repo, tmp_path, "s00000004", "again")
    import shutil

    shutil.rmtree(first.path)
    second = make(repo, tmp_path, "s00000004", "again")
    assert second.path == first.path and Path(second.path).is_dir()
    assert second.branch == "agentmail/again-2"  # the old branch keeps its commits


def test_worktree_retention_durations() -> None:
    from mailui4agents.cli.bridge import parse_duration

    assert parse_duration("7d") == 7 * 86400 and parse_duration("7") == 7 * 86400
    assert parse_duration("12h") == 43200 and parse_duration("30m") == 1800
    assert parse_duration("1s") == 1 and parse_duration("0") == 0
    for bad in ("", "d", "-1d", "soon", "inf", "nan", "4000d"):
        with pytest.raises(ValueError):
            parse_duration(bad)
