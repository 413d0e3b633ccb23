"""Fixtures of the service tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mailui4agents.app import start_gateway
from mailui4agents.settings import Settings
from mailui4agents.state import Gateway


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[Gateway]:
    """A started gateway (no app, no HTTP) over the test's `settings`, on each
    database backend; a module may define its own `gw` over other settings."""
    gateway, _ = await start_gateway(settings)
    try:
        yield gateway
    finally:
        await gateway.db.dispose()
