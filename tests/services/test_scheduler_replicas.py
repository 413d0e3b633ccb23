"""Scheduler jobs run once across replicas (services/scheduler.run_once): while
one transaction holds a job's lock, another gets False for that job (and only
that job) and skips its pass; once the first ends, the job is free again."""

from __future__ import annotations

import pytest

from mailui4agents.db.engine import Database
from mailui4agents.services import scheduler
from mailui4agents.settings import Settings
from tests.conftest import Api

pytestmark = pytest.mark.anyio


async def test_a_job_runs_in_one_transaction_at_a_time(settings: Settings, api: Api) -> None:
    del api  # the gateway's migrations; this test talks to the database
    # Two engines: two gateway processes (SQLite: there is only ever one).
    one, two = (
        Database(settings.resolved_database_url()),
        Database(settings.resolved_database_url()),
    )
    try:
        if one.is_sqlite:
            async with one.write() as s:
                assert await scheduler.run_once(s, "expire")
            return
        async with one.write() as s1:
            assert await scheduler.run_once(s1, "expire")
            async with two.write() as s2:
                assert not await scheduler.run_once(s2, "expire")  # the other replica skips
                assert await scheduler.run_once(s2, "sweep")  # another job is free
        async with two.write() as s2:
            assert await scheduler.run_once(s2, "expire")  # released at commit
    finally:
        await one.dispose()
        await two.dispose()
