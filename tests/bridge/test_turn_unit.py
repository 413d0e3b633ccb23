"""TurnHandler details that a whole-system test cannot time: what the ledger
holds when the bridge dies right after reading a mail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mailui4agents.bridge.activity import Board
from mailui4agents.bridge.ledger import Ledger
from mailui4agents.bridge.park import ParkServer
from mailui4agents.bridge.pool import Pool, Slot
from mailui4agents.bridge.runners.command import CommandRunner
from mailui4agents.bridge.session_map import SessionMap
from mailui4agents.bridge.turn import Job, TurnHandler, TurnSettings

pytestmark = pytest.mark.anyio


class Died(BaseException):
    """The bridge process dying at this very point."""


class ReadThenDie:
    """A client whose read marks the mail read on the gateway — and then the bridge dies."""

    def __init__(self) -> None:
        self.read: list[str] = []

    async def read_mail(self, mail_id: str, **_: Any) -> Any:
        self.read.append(mail_id)
        raise Died


async def test_a_mail_is_in_the_ledger_before_it_is_read(tmp_path: Path) -> None:
    """Reading marks the mail read, so the catch-up after a crash would not see it:
    only the ledger can bring it back, hence "delivered" is written first."""
    ledger = Ledger.open(tmp_path / "ledger.jsonl")
    client = ReadThenDie()
    park = ParkServer()
    handler = TurnHandler(
        TurnSettings(agent="claude", url="http://gw", key="k", state_dir=tmp_path),
        CommandRunner(["true"]),
        client,  # type: ignore[arg-type]
        ledger,
        SessionMap.open(tmp_path / "sessions.json"),
        park,
        Board(),
    )
    pool: Pool[Job] = Pool(1, handler.handle, key=lambda j: j.mail_id)
    try:
        with pytest.raises(Died):
            await handler.handle(Job("m1", "s1"), Slot(pool, "s1"))
    finally:
        park.close()
    assert client.read == ["m1"]
    again = Ledger.open(tmp_path / "ledger.jsonl")
    assert again.was_interrupted("m1") and [e.mail_id for e in again.unfinished()] == ["m1"]
