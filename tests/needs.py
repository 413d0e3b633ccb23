"""One rule for a test whose tool is missing (Chromium, axe-core, PostgreSQL, an
agent CLI, the installed console script): under CI=true it fails at once, naming
the install step; elsewhere it skips. tests/conftest.py also fails a CI run that
skipped anything, so no skip can hide a missing install step."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def systemd_analyze() -> str:
    """`systemd-analyze`, which checks the units `agentmail install-service` writes
    (Debian package `systemd`; scripts/install-test-deps.sh)."""
    import shutil

    found = shutil.which("systemd-analyze")
    if found is None:
        missing("systemd-analyze missing: apt-get install systemd (scripts/install-test-deps.sh)")
    return found
