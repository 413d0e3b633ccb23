"""Fixtures for CLI tests: a clean environment and a private config directory."""

from __future__ import annotations

from pathlib import Path

import pytest

AGENTMAIL_VARS = (
    "AGENTMAIL_URL",
    "AGENTMAIL_KEY",
    "AGENTMAIL_TOKEN",
    "AGENTMAIL_AGENT",
    "AGENTMAIL_PASSWORD",
    "AGENTMAIL_NEW_PASSWORD",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AGENTMAIL_* from the developer's shell; config files go to ``tmp_path``."""
    for name in AGENTMAIL_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path
