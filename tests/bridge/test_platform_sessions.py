"""The one helper behind every runner's heartbeat sessions (bridge/runners/base.py):
newest files first, at most RECENT_SESSIONS, unreadable ones left out, titles on
one line (checked here without the CLIs; each runner's e2e test reads real files)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from mailui4agents.bridge.runners.base import RECENT_SESSIONS, platform_session, recent_files
from mailui4agents.bridge.runners.pi import PiRunner


def _pi_session(root: Path, n: int, cwd: str, mtime: int) -> Path:
    path = root / "sessions" / f"--work{n % 3}--" / f"2026_{n:04d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"type": "session", "id": f"pi-{n:04d}", "cwd": cwd},
        {"type": "message", "message": {"role": "user", "content": f"task\n  number {n}"}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    os.utime(path, (mtime, mtime))
    return path


def test_the_newest_sessions_come_first_and_at_most_the_limit(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    for n in range(RECENT_SESSIONS + 5):
        _pi_session(agent_dir, n, "/srv/shop", 1_000_000 + n)
    (agent_dir / "sessions" / "--work0--" / "broken.jsonl").write_text("not json\n")
    found = PiRunner({"agent_dir": str(agent_dir)}).recent_sessions(["/srv/shop"])
    # The newest RECENT_SESSIONS files are read; the broken one (newest) gives nothing.
    assert len(found) == RECENT_SESSIONS - 1
    ids = [s["platform_id"] for s in found]
    assert ids == [f"pi-{n:04d}" for n in range(RECENT_SESSIONS + 4, 5, -1)]
    assert found[0]["title"] == f"task number {RECENT_SESSIONS + 4}"
    stamp = datetime.fromtimestamp(1_000_000 + RECENT_SESSIONS + 4, UTC)
    assert found[0]["updated_at"] == stamp.isoformat().replace("+00:00", "Z")


def test_by_name_sorts_on_the_file_name_not_the_time(tmp_path: Path) -> None:
    for name, mtime in (("a-1.jsonl", 3), ("c-3.jsonl", 1), ("b-2.jsonl", 2)):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, (mtime, mtime))

    def read(path: Path) -> dict[str, str]:
        return {"name": path.name}

    assert [x["name"] for x in recent_files(tmp_path, "*.jsonl", read, by_name=True)] == [
        "c-3.jsonl", "b-2.jsonl", "a-1.jsonl"]  # fmt: skip
    assert [x["name"] for x in recent_files(tmp_path, "*.jsonl", read)] == [
        "a-1.jsonl", "b-2.jsonl", "c-3.jsonl"]  # fmt: skip
    assert recent_files(tmp_path / "missing", "*.jsonl", read) == []


def test_a_session_without_a_title_gets_the_defaults() -> None:
    when = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    got = platform_session("id-1", "  \n ", "/srv", when, default_title="x 1", default_slug="x-1")
    assert got == {
        "platform_id": "id-1", "slug": "x-1", "title": "x 1", "cwd": "/srv",
        "updated_at": "2026-12-01T12:00:00Z"}  # fmt: skip
    long = platform_session("id", "word " * 100, "/srv", when, default_title="", default_slug="")
    assert len(long["title"]) == 120 and "\n" not in long["title"] and long["slug"]
