"""PostgreSQL for the DB fixtures (docs/postgres.md): one throwaway cluster per
test run, one database migrated to head as a template, and per test a fresh
`CREATE DATABASE … TEMPLATE` copy of it.

Every test that uses the `settings` fixture (so `api` too) runs once per backend
in `BACKENDS`; `@pytest.mark.sqlite_only` keeps a test on SQLite when what it
checks exists only there (the database file itself). Without PostgreSQL binaries
the postgresql cases skip, and under CI=true a skip fails the run
(tests/conftest.py), so CI cannot pass without PostgreSQL."""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import anyio
import pytest

from mailui4agents.app import start_gateway
from mailui4agents.settings import Settings
from mailui4agents.testing_pg import PgCluster, find_bindir, run_async
from tests.needs import missing

BACKENDS = ("sqlite", "postgresql")
_counter = itertools.count()


def backends_for(definition: pytest.Function | None) -> list[str]:
    only = os.environ.get("AGENTMAIL_TEST_BACKEND")  # e.g. run just one side locally
    chosen = [only] if only in BACKENDS else list(BACKENDS)
    if definition is not None and definition.get_closest_marker("sqlite_only"):
        chosen = ["sqlite"]
    return chosen


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    bindir = find_bindir()
    if bindir is None:
        missing("PostgreSQL binaries missing: run scripts/install-test-deps.sh")
    cluster = PgCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_template(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of a database migrated to head with its admin (made once)."""
    from tests.conftest import fast_settings

    pg_cluster.execute("CREATE DATABASE agentmail_template")
    settings = fast_settings(
        tmp_path_factory.mktemp("pg-template"), database_url=pg_cluster.url("agentmail_template")
    )

    async def make() -> None:
        gw, _ = await start_gateway(settings)
        await gw.db.dispose()

    anyio.run(make)
    return "agentmail_template"


def fresh_database(cluster: PgCluster, template: str) -> str:
    name = f"t{os.getpid()}_{next(_counter)}"
    # FILE_COPY: about twice as fast as the default WAL_LOG for a small template.
    cluster.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    return name


@pytest.fixture
def pg_database(pg_cluster: PgCluster, pg_template: str) -> Iterator[str]:
    """A postgresql:// URL of a fresh copy of the template, dropped afterwards."""
    name = fresh_database(pg_cluster, pg_template)
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_database_from(request: pytest.FixtureRequest, template: str) -> str:
    """Like `pg_database`, from another template (a snapshot, tests/conftest.py):
    the URL of a fresh copy, dropped when the test ends."""
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = fresh_database(cluster, template)
    request.addfinalizer(lambda: cluster.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return cluster.url(name)


def _asyncpg_sql(sql: str) -> str:
    """sqlite3's `?` placeholders as asyncpg's `$1, $2, …`."""
    parts = sql.split("?")
    return parts[0] + "".join(f"${i}{p}" for i, p in enumerate(parts[1:], 1))


def db_scalar(settings: Settings, sql: str, *args: Any) -> Any:
    """One value of a plain SQL query (`?` placeholders) on the test's database,
    whichever backend it runs on."""
    if settings.database_url is None:
        with closing(sqlite3.connect(settings.data_dir / "agentmail.db")) as db:
            return db.execute(sql, args).fetchone()[0]
    import asyncpg

    async def go() -> Any:
        conn = await asyncpg.connect(settings.database_url)
        try:
            return await conn.fetchval(_asyncpg_sql(sql), *args)
        finally:
            await conn.close()

    return run_async(go)


def db_all_rows(settings: Settings) -> dict[str, list[str]]:
    """Every row of every table (as sorted reprs), whichever backend."""
    if settings.database_url is None:
        with closing(sqlite3.connect(settings.data_dir / "agentmail.db")) as db:
            names = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1"
            tables = [r[0] for r in db.execute(names)]
            return {t: sorted(repr(r) for r in db.execute(f'SELECT * FROM "{t}"')) for t in tables}
    import asyncpg

    async def go() -> dict[str, list[str]]:
        conn = await asyncpg.connect(settings.database_url)
        try:
            names = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            tables = [r[0] for r in await conn.fetch(names)]
            return {
                t: sorted(repr(tuple(r)) for r in await conn.fetch(f'SELECT * FROM "{t}"'))
                for t in tables
            }
        finally:
            await conn.close()

    return run_async(go)
