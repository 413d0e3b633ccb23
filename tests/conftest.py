"""Shared fixtures: an in-process app on a real SQLite file, and real gateway
subprocesses for SSE, restarts and end-to-end scenarios."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mailui4agents.app import create_app, start_gateway
from mailui4agents.settings import Settings
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.pg_fixtures import backends_for, pg_cluster, pg_database, pg_template  # noqa: F401

ADMIN_PASSWORD = "admin-password-for-tests"
USER_PASSWORD = "user-password-for-tests"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fast_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        admin_password=ADMIN_PASSWORD,
        argon2_time_cost=1,
        argon2_memory_kib=64,
        **overrides,
    )


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database migrated to head with its admin, made once per test run: each
    test starts from a copy instead of running every migration again."""
    root = tmp_path_factory.mktemp("template")
    settings = fast_settings(root)

    async def make() -> None:
        gw, _ = await start_gateway(settings)
        await gw.db.dispose()

    anyio.run(make)
    return settings.data_dir


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests on the DB fixtures run on SQLite and on PostgreSQL (tests/pg_fixtures.py);
    so do the gateway subprocess tests marked `live_both_backends` (the others keep
    the `live_backend` fixture's SQLite: a subprocess per test per backend is dear)."""
    if "db_backend" in metafunc.fixturenames:
        metafunc.parametrize("db_backend", backends_for(metafunc.definition))
    if "live_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "live_both_backends"
    ):
        metafunc.parametrize("live_backend", backends_for(metafunc.definition))


@pytest.fixture
def settings(tmp_path: Path, db_backend: str, request: pytest.FixtureRequest) -> Settings:
    if db_backend == "postgresql":
        s = fast_settings(tmp_path, database_url=request.getfixturevalue("pg_database"))
        s.data_dir.mkdir(parents=True)
        return s
    s = fast_settings(tmp_path)
    copy_template(request.getfixturevalue("template_db"), s.data_dir)
    return s


def copy_template(template_db: Path, data_dir: Path) -> None:
    """A data dir holding a copy of the migrated template (the database and any
    WAL files beside it)."""
    data_dir.mkdir(parents=True)
    for f in template_db.iterdir():
        shutil.copy2(f, data_dir / f.name)


@dataclass
class Api:
    """An httpx client plus helpers to make principals."""

    http: httpx.AsyncClient
    admin_token: str = ""
    tokens: dict[str, str] = field(default_factory=dict)

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    async def login(self, username: str, password: str) -> str:
        r = await self.http.post(
            "/api/v1/auth/login", json={"username": username, "password": password}
        )
        r.raise_for_status()
        token: str = r.json()["token"]
        self.tokens[username] = token
        return token

    async def user(self, name: str, *, is_admin: bool = False) -> str:
        r = await self.http.post(
            "/api/v1/admin/users",
            json={"username": name, "password": USER_PASSWORD, "is_admin": is_admin},
            headers=self.auth("admin"),
        )
        assert r.status_code == 201, r.text
        return await self.login(name, USER_PASSWORD)

    async def agent(
        self, name: str, workspaces: list[str] | None = None, owners: list[str] | None = None
    ) -> str:
        body: dict[str, Any] = {"name": name}
        if workspaces is not None:
            body["workspaces"] = workspaces
        if owners is not None:
            body["owners"] = owners
        r = await self.http.post("/api/v1/admin/agents", json=body, headers=self.auth("admin"))
        assert r.status_code == 201, r.text
        key: str = r.json()["key"]
        self.tokens[name] = key
        return key

    async def send(
        self, sender: str, to: list[str], subject: str = "s", body: str = "b", **extra: Any
    ) -> httpx.Response:
        path = (
            "/api/v1/mail" if self.tokens[sender].startswith("am_user_") else "/api/v1/agent/mail"
        )
        return await self.http.post(
            path,
            json={"to": to, "subject": subject, "body": body, **extra},
            headers=self.auth(sender),
        )


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    """The app in-process (httpx ASGI transport) over a real SQLite file."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            a = Api(http)
            await a.login("admin", ADMIN_PASSWORD)
            yield a


@pytest.fixture
def live_backend() -> str:
    """The database of `gateway_process`: SQLite unless the test is marked
    `live_both_backends` (then pytest_generate_tests gives both)."""
    return "sqlite"


@pytest.fixture
def gateway_process(
    tmp_path: Path, live_backend: str, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    """A real `agentmail serve`: on a SQLite file in its data dir, or on a fresh
    PostgreSQL database of the test cluster (a copy of the migrated template,
    tests/pg_fixtures.py; dropped after the process stops). The SQLite file is a
    copy of the migrated template too, so start-up skips the migrations (about a
    second each); tests/e2e/test_serve.py starts on an empty data dir."""
    env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    extra: list[str] = []
    if live_backend == "postgresql":
        extra = ["--database-url", request.getfixturevalue("pg_database")]
    else:
        copy_template(request.getfixturevalue("template_db"), tmp_path / "data")
    gp = GatewayProcess(data_dir=tmp_path / "data", env=env, extra_args=extra)
    gp.start()
    try:
        if live_backend == "postgresql":  # it really runs on PostgreSQL: no SQLite file
            assert not (gp.data_dir / "agentmail.db").exists(), "serve ignored --database-url"
        yield gp
    finally:
        gp.stop()


@pytest.fixture
async def live(gateway_process: GatewayProcess) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=gateway_process.url, timeout=30) as http:
        a = Api(http)
        await a.login("admin", ADMIN_PASSWORD)
        yield a


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Under CI=true a skipped test is a failure: a required group (browser,
    PostgreSQL, real subprocesses) that silently skipped would make CI green
    while checking nothing."""
    if os.environ.get("CI", "").lower() != "true":
        return
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.write_line(
            f"CI=true: {len(skipped)} test(s) skipped; a skip is a failure in CI", red=True
        )
        for report in skipped:
            terminalreporter.write_line(f"  skipped: {report.nodeid}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI", "").lower() == "true":
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", {}) if reporter is not None else {}
        if stats.get("skipped") and session.exitstatus == 0:
            session.exitstatus = 1
