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
from collections.abc import Iterator

import anyio
import pytest

from mailui4agents.app import start_gateway
from mailui4agents.testing_pg import PgCluster, find_bindir

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
        pytest.skip("PostgreSQL binaries missing: run scripts/install-test-deps.sh")
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
