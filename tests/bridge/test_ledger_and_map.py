"""The ledger (crash-safe, torn lines) and the session map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailui4agents.bridge.ledger import Ledger
from mailui4agents.bridge.session_map import SessionMap


def test_delivered_started_failed_completed_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger.open(path)
    assert ledger.delivered("m1", "s1") == 1
    ledger.started("m1", 1234, 99)
    ledger.failed("m1", "error: boom")
    assert ledger.delivered("m1", "s1") == 2
    ledger.delivered("m2", "s1")
    ledger.completed("m1", "answered")
    again = Ledger.open(path)
    assert again.is_completed("m1") and not again.is_completed("m2")
    assert again.get("m1").attempts == 2
    assert [e.mail_id for e in again.unfinished()] == ["m2"]
    assert again.was_interrupted("m2") and not again.was_interrupted("m1")
    assert all(line.endswith("}") for line in path.read_text().splitlines())


def test_a_failed_attempt_is_not_an_interruption(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.jsonl")
    ledger.delivered("m1", "s1")
    assert ledger.was_interrupted("m1")
    ledger.failed("m1", "quota")
    assert not ledger.was_interrupted("m1")
    ledger.delivered("m1", "s1")
    ledger.started("m1", 5, 6)
    assert ledger.was_interrupted("m1")
    entry = Ledger.open(tmp_path / "l.jsonl").get("m1")
    assert (entry.pgid, entry.start_ticks) == (5, 6)


@pytest.mark.parametrize("cut", [1, 10, 25])
def test_a_torn_last_line_is_skipped_and_cut_off(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger.open(path)
    ledger.delivered("m1", "s1")
    whole = path.read_bytes()
    line = json.dumps({"mail_id": "m1", "state": "completed", "outcome": "answered"}).encode()
    path.write_bytes(whole + line[:cut])  # the bridge died inside this write
    again = Ledger.open(path)
    assert again.skipped_lines == 1
    assert not again.is_completed("m1") and again.was_interrupted("m1")
    assert path.read_bytes() == whole  # the next append starts on a clean line
    again.completed("m1", "answered")
    assert Ledger.open(path).is_completed("m1")


def test_an_unreadable_line_in_the_middle_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(
        '{"mail_id":"m1","state":"delivered","attempt":1,"session_id":"s"}\n'
        "garbage\n"
        '{"mail_id":"m1","state":"weird"}\n'
        '{"mail_id":"m1","state":"completed","outcome":"answered"}\n'
    )
    ledger = Ledger.open(path)
    assert ledger.is_completed("m1") and ledger.skipped_lines == 2


def test_the_session_map_persists_and_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    sessions = SessionMap.open(path)
    sessions.set("s1", "p1")
    sessions.set("s2", "p2")
    sessions.set("s1", "p1b")
    assert SessionMap.open(path).ids == {"s1": "p1b", "s2": "p2"}
    sessions.forget("s2")
    assert SessionMap.open(path).get("s2") is None
    assert [p.name for p in tmp_path.iterdir()] == ["sessions.json"]  # no temporary left


def test_a_broken_session_map_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        SessionMap.open(path)
