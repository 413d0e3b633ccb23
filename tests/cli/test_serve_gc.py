"""`agentmail serve` freezes what exists once it has started (cli/serve.py): a
full collection then no longer walks the modules, the app and its routes — a
pause of about 110 ms for every request in flight (bench/gc_pause.py).

The real command, its real lifespan and listening socket (port 0), in this
process; only uvicorn's main loop is replaced, by one look at the collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from click.testing import CliRunner
from tests.conftest import ADMIN_PASSWORD

from mailui4agents.cli.serve import serve


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()  # another test may have frozen this process (the hook does)
    try:
        yield
    finally:
        gc.unfreeze()


def test_serve_freezes_the_objects_it_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    seen: list[int] = []

    async def main_loop(self: uvicorn.Server) -> None:
        seen.append(gc.get_freeze_count())  # started, listening: then it stops

    monkeypatch.setattr(uvicorn.Server, "main_loop", main_loop)
    assert gc.get_freeze_count() == 0
    done = CliRunner().invoke(
        serve,
        ["--port", "0", "--data-dir", str(tmp_path / "data"), "--log-level", "warning"],
        env={
            "AGENTMAIL_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "AGENTMAIL_ARGON2_TIME_COST": "1",
            "AGENTMAIL_ARGON2_MEMORY_KIB": "64",
        },
    )
    assert done.exit_code == 0, done.output
    assert "listening on http://127.0.0.1:" in done.output
    assert len(seen) == 1
    assert seen[0] > 10_000  # the app's objects, not a handful
