"""Comment line validation against a real `git diff` (docs/review.md): a turn in
a real repository that edits, renames, adds, deletes, changes a binary file and
one with a name git quotes. Every line of every file, on both sides, is accepted
exactly when an oracle written apart — the `@@ -a,b +c,d @@` headers alone —
says it is shown. Runs git: not in the fast tier."""

from __future__ import annotations

import codecs
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api
from tests.work_mail import upload

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.sqlite_only]

QUOTED = "spaced é.txt"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "core.quotepath=true", *args],
        cwd=repo, check=True, capture_output=True, text=True, timeout=30,
        env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return done.stdout


def real_turn(repo: Path) -> str:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    lines = [f"line {i}" for i in range(1, 41)]
    (repo / "a.py").write_text("\n".join(lines) + "\n")
    (repo / "old.py").write_text("\n".join(f"old {i}" for i in range(1, 31)) + "\n")
    (repo / "gone.txt").write_text("one\ntwo\n")
    (repo / "bin.dat").write_bytes(bytes(range(256)))
    (repo / QUOTED).write_text("a\nb\nc\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    lines[4] = "line five"
    lines.insert(8, "inserted")
    del lines[30]
    (repo / "a.py").write_text("\n".join(lines) + "\n")
    (repo / "old.py").rename(repo / "new.py")
    renamed = [f"old {i}" for i in range(1, 31)]
    renamed[14] = "changed 15"
    (repo / "new.py").write_text("\n".join(renamed) + "\n")
    (repo / "gone.txt").unlink()
    (repo / "added.txt").write_text("x\ny\nz\n")
    (repo / "bin.dat").write_bytes(bytes(range(255, -1, -1)))
    (repo / QUOTED).write_text("a\nB\nc\n")
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", "-M", "HEAD")


def shown(diff: str) -> dict[str, dict[str, set[int]]]:
    """Per file (its new path, or old when deleted), the line numbers each side
    shows: from the hunk headers only."""
    out: dict[str, dict[str, set[int]]] = {}
    current = ""
    old = ""
    for line in diff.split("\n"):
        if line.startswith("--- "):
            old = line[4:]
        elif line.startswith("+++ "):
            new = line[4:]
            raw = (old if new == "/dev/null" else new).rstrip("\t")  # a tab after a spaced name
            if raw.startswith('"'):  # C-quoted by git: Python's escapes read it
                raw = codecs.escape_decode(raw[1:-1].encode())[0].decode("utf-8")
            current = raw[2:]
            out[current] = {"old": set(), "new": set()}
        elif m := re.match(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line):
            a, b = int(m[1]), int(m[2] or 1)
            c, d = int(m[3]), int(m[4] or 1)
            out[current]["old"] |= set(range(a, a + b))
            out[current]["new"] |= set(range(c, c + d))
    return out


async def test_every_line_of_a_real_diff_is_accepted_exactly_when_it_is_shown(
    api: Api, tmp_path: Path
) -> None:
    diff = real_turn(tmp_path / "repo")
    assert '"a/spaced \\303\\251.txt"' in diff and "rename from old.py" in diff
    assert "Binary files" in diff
    oracle = shown(diff)
    assert set(oracle) == {"a.py", "added.txt", "gone.txt", "new.py", QUOTED}
    files: list[dict[str, Any]] = [{"path": p} for p in [*oracle, "bin.dat"]]
    await api.user("ana")
    await api.agent("claude")
    first = (await api.send("ana", ["claude@/srv/r.new"], subject="real")).json()
    summary = json.dumps({"files": files}).encode()
    ids = [
        await upload(api, "claude", "work.json", summary, "application/json"),
        await upload(api, "claude", "turn.diff", diff.encode(), "text/x-diff"),
    ]
    r = await api.http.post(
        "/api/v1/agent/mail",
        json={"to": [first["from"]], "subject": "Work", "body": "b", "type": "work",
              "parent_mail_id": first["id"], "from_session_id": first["session_id"],
              "attachment_ids": ids},
        headers=api.auth("claude"),
    )  # fmt: skip
    assert r.status_code == 201, r.text
    url = f"/api/v1/mails/{r.json()['id']}/comments"
    checked = 0
    for path in [*oracle, "bin.dat"]:
        for side in ("new", "old"):
            want = oracle.get(path, {}).get(side, set())
            for line in range(1, 45):
                body = {"path": path, "line": line, "side": side, "body": "?"}
                got = await api.http.post(url, json=body, headers=api.auth("ana"))
                assert got.status_code == (201 if line in want else 400), (path, side, line)
                if got.status_code == 201:
                    checked += 1
                    gone = await api.http.delete(
                        f"/api/v1/comments/{got.json()['id']}", headers=api.auth("ana")
                    )
                    assert gone.status_code == 204
                else:
                    assert got.json()["error"]["field"] == "line"
    assert checked > 40
