"""hooks/claims.py: one asker per permission dialog, on this machine."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from mailui4agents.hooks import claims

PREFIX = "race:0123456789abcdef0123456789abcdef01234567:"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    return {"XDG_RUNTIME_DIR": str(runtime)}


def test_the_first_claim_wins_until_it_is_released(env: dict[str, str]) -> None:
    first = claims.take(env, PREFIX, 30)
    assert first is not None and claims.held(first)
    assert claims.take(env, PREFIX, 30) is None  # a second asker opens no request
    assert claims.take(env, PREFIX + "other:", 30) is not None  # another call is free
    claims.release(first)
    assert not claims.held(first)
    assert claims.take(env, PREFIX, 30) is not None
    mode = stat.S_IMODE(os.stat(claims.claim_dir(env)).st_mode)
    assert mode == 0o700


def test_a_claim_whose_wait_is_over_or_whose_process_is_gone_is_free(
    env: dict[str, str],
) -> None:
    path = claims.claim_path(env, PREFIX)
    Path(path).write_text(f"{os.getpid()} {time.time() - 1:.3f}")  # its wait is over
    assert claims.take(env, PREFIX, 30) == path
    Path(path).write_text(f"999999999 {time.time() + 60:.3f}")  # no such process
    assert claims.take(env, PREFIX, 30) == path
    Path(path).write_text("garbage")
    assert claims.take(env, PREFIX, 30) == path


def test_only_the_own_claim_is_released(env: dict[str, str]) -> None:
    path = claims.claim_path(env, PREFIX)
    Path(path).write_text(f"1 {time.time() + 60:.3f}")  # pid 1: alive, not ours
    claims.release(path)
    assert Path(path).exists() and claims.held(path)
    assert claims.take(env, PREFIX, 30) is None


def test_a_claim_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    (runtime / "agentmail-claims").mkdir(parents=True)
    (runtime / "agentmail-claims").chmod(0o777)
    with pytest.raises(OSError, match="not a private directory"):
        claims.take({"XDG_RUNTIME_DIR": str(runtime)}, PREFIX, 30)


def test_waiting_ends_when_the_claim_is_released(env: dict[str, str]) -> None:
    path = claims.take(env, PREFIX, 30)
    assert path is not None
    assert not claims.wait_released(path, time.monotonic() + 0.2)  # still held
    claims.release(path)
    assert claims.wait_released(path, time.monotonic() + 5)
