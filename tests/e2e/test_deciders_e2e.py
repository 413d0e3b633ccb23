"""The "agent picks its own approver" attack against a real gateway subprocess, on
SQLite and on PostgreSQL (the `live_backend` parameter, tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.scenarios import an_agent_cannot_pick_its_own_approver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.live_both_backends]


async def test_an_agent_cannot_pick_its_own_approver_on_a_real_gateway(live: Api) -> None:
    await an_agent_cannot_pick_its_own_approver(live)
