"""`agentmail bridge` that freezes at a chosen point of settling a turn, for a test
to SIGKILL it there: the crash lands exactly between two steps, without a sleep.

`CRASH_AT=result`: right after the turn's result file is written (the CLI has
finished; nothing is posted, nothing recorded). `CRASH_AT=completed`: right before
the ledger records the outcome (the reply is already posted). Once frozen it writes
the mail id to `$CRASH_MARK`. The freeze blocks the whole process, event loop
included, so nothing of the bridge moves on until the kill — as with a crash.

Run as a script: `python tests/bridge/crashing_bridge.py bridge ARGS...`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from mailui4agents.bridge.ledger import Ledger
from mailui4agents.bridge.results import Results, TurnResult
from mailui4agents.cli.main import main


def freeze(mail_id: str) -> None:
    Path(os.environ["CRASH_MARK"]).write_text(mail_id)
    threading.Event().wait()  # until SIGKILL


def install(at: str) -> None:
    if at == "result":
        save = Results.save

        def save_then_freeze(self: Results, result: TurnResult) -> None:
            save(self, result)
            freeze(result.mail_id)

        Results.save = save_then_freeze  # type: ignore[method-assign]
    elif at == "completed":

        def freeze_before(self: Ledger, mail_id: str, *_: Any, **__: Any) -> None:
            freeze(mail_id)

        Ledger.completed = freeze_before  # type: ignore[method-assign]
    else:
        raise SystemExit(f"CRASH_AT={at!r}: result or completed")


if __name__ == "__main__":
    install(os.environ["CRASH_AT"])
    main()
