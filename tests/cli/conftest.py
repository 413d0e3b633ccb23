"""Fixtures for CLI tests: a clean environment, a private config directory, and
one real gateway per module for the modules whose tests don't change its state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import ADMIN_PASSWORD, copy_template

from mailui4agents import testing
from mailui4agents.testing import GatewayProcess

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


@pytest.fixture(scope="module")
def shared_gateway(
    tmp_path_factory: pytest.TempPathFactory, template_db: Path
) -> Iterator[GatewayProcess]:
    """One `agentmail serve` for the module (its start is the dearest part of a
    test there), on a copy of the migrated template. The module's tests share it
    as they would a deployment: each with principals of its own (ana-N, claude-N),
    none changing what the others rely on (settings, restarts, the admin's login);
    a test that must, or that needs a database nobody else touched, takes
    `gateway_process` instead."""
    data_dir = tmp_path_factory.mktemp("shared-gateway") / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(
        data_dir=data_dir,
        env=testing.clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **testing.FAST_HASH_ENV),
    )
    gp.start()
    try:
        yield gp
    finally:
        gp.stop()
