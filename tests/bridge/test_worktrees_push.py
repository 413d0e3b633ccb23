"""Open PR (docs/review.md): the bridge finds the worktree's remote and pushes the
session's branch to it — real git, a real bare repository as the remote."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mailui4agents.bridge import worktree_finish as finish
from mailui4agents.bridge import worktrees as w
from tests.bridge.git_repos import git, init_repo

pytestmark = pytest.mark.e2e  # starts git processes


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "project", {"a.txt": "one\n"})


def bare(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    return path


def make(repo: Path, tmp_path: Path) -> w.Worktree:
    found = w.find_repo(repo)
    assert found is not None
    return w.create(found, tmp_path / "state" / "worktrees", "s-1", "fix-it")


def test_no_remote_no_open_pr(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path)
    assert finish.remote_of(wt) is None


def test_the_remote_is_the_base_branchs_else_origin(tmp_path: Path, repo: Path) -> None:
    git(repo, "remote", "add", "origin", str(bare(tmp_path, "origin")))
    wt = make(repo, tmp_path)
    assert finish.remote_of(wt) == "origin"
    git(repo, "remote", "add", "up", str(bare(tmp_path, "up")))
    git(repo, "config", "branch.main.remote", "up")
    assert finish.remote_of(wt) == "up"
    git(repo, "remote", "remove", "origin")
    git(repo, "config", "branch.main.remote", "gone")  # tracks a remote that is not there
    assert finish.remote_of(wt) is None


def test_push_lands_the_branch_with_uncommitted_work(tmp_path: Path, repo: Path) -> None:
    remote = bare(tmp_path, "origin")
    git(repo, "remote", "add", "origin", str(remote))
    wt = make(repo, tmp_path)
    (Path(wt.path) / "a.txt").write_text("one\ntwo\n")  # not committed by the agent
    out = finish.push(wt, "origin")
    assert out.status == "done", out.message
    assert "gh pr create --base main --head agentmail/fix-it" in out.message
    assert "on the web" not in out.message  # a file path remote has no compare page
    pushed = git(remote, "rev-parse", "refs/heads/agentmail/fix-it")
    assert pushed == git(Path(wt.path), "rev-parse", "HEAD")
    assert git(remote, "show", f"{pushed}:a.txt") == "one\ntwo"
    assert git(remote, "log", "-1", "--format=%s", pushed) == (
        "agentmail: uncommitted work of agentmail/fix-it"
    )
    # main itself was not pushed: only the session's branch
    assert subprocess.run(["git", "rev-parse", "-q", "--verify", "refs/heads/main"],
                          cwd=remote, capture_output=True).returncode != 0  # fmt: skip


def test_a_push_git_refuses_fails_with_gits_words(tmp_path: Path, repo: Path) -> None:
    git(repo, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    wt = make(repo, tmp_path)
    out = finish.push(wt, "origin")
    assert out.status == "failed"
    assert "git push origin agentmail/fix-it failed:" in out.message
    assert "nowhere.git" in out.message  # git's own words name the remote


def test_a_remote_name_that_is_an_option_is_refused(tmp_path: Path, repo: Path) -> None:
    wt = make(repo, tmp_path)
    assert finish.push(wt, "--receive-pack=touch x").status == "refused"


def test_a_https_remote_also_gets_its_compare_page(tmp_path: Path, repo: Path) -> None:
    git(repo, "remote", "add", "origin", "https://github.com/acme/shop.git")
    git(repo, "config", "url.file://" + str(bare(tmp_path, "gh")) + ".insteadOf",
       "https://github.com/acme/shop.git")  # fmt: skip
    wt = make(repo, tmp_path)
    out = finish.push(wt, "origin")
    assert out.status == "done", out.message
    assert "https://github.com/acme/shop/compare/main...agentmail/fix-it?expand=1" in out.message


def test_compare_pages() -> None:
    assert finish.compare_url("https://gitlab.com/g/sub/p.git\n", "main", "agentmail/x") == (
        "https://gitlab.com/g/sub/p/-/merge_requests/new"
        "?merge_request[source_branch]=agentmail/x&merge_request[target_branch]=main"
    )
    assert finish.compare_url("git@github.com:acme/shop.git", "main", "agentmail/x") is None
    assert finish.compare_url("https://example.org/acme/shop.git", "main", "agentmail/x") is None
