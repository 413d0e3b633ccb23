"""The agent's last words, read from the end of a Claude Code transcript
(hooks/idle.py): bounded, skipping tool calls, a cut first line and bad lines."""

from __future__ import annotations

import json
from pathlib import Path

from mailui4agents.hooks.idle import last_assistant_text


def _line(kind: str, content: object) -> str:
    return json.dumps({"type": kind, "message": {"role": kind, "content": content}}) + "\n"


def test_the_last_assistant_text_wins_over_later_tool_calls(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        _line("assistant", [{"type": "text", "text": "old"}])
        + _line("user", "go on")
        + _line("assistant", [{"type": "text", "text": "Shall I deploy?"}])
        + "not json\n"
        + _line("assistant", [{"type": "tool_use", "id": "x", "name": "Bash", "input": {}}])
        + _line("user", [{"type": "tool_result", "content": "assistant said"}])
    )
    assert last_assistant_text(str(path)) == "Shall I deploy?"


def test_only_the_tail_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    early = _line("assistant", [{"type": "text", "text": "early"}])
    path.write_text(early + _line("user", "x" * 5000))
    assert last_assistant_text(str(path), tail_bytes=4000) is None
    assert last_assistant_text(str(path), tail_bytes=len(early) + 6000) == "early"


def test_a_missing_or_empty_transcript_gives_nothing(tmp_path: Path) -> None:
    assert last_assistant_text(str(tmp_path / "none.jsonl")) is None
    (tmp_path / "empty.jsonl").write_text("")
    assert last_assistant_text(str(tmp_path / "empty.jsonl")) is None
