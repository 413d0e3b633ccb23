"""Shared fixtures: an in-process app on a real SQLite file (or PostgreSQL
database), and real gateway subprocesses for SSE, restarts and end-to-end scenarios.

Every test starts on a database no other test has touched: a copy of the migrated
template, or of its module's `@snapshot` world (built once per backend)."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from mailui4agents.app import create_app, fixed_at_build, start_gateway
from mailui4agents.settings import Settings
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.pg_fixtures import (  # noqa: F401
    backends_for,
    fresh_database,
    pg_cluster,
    pg_database,
    pg_database_from,
    pg_template,
)

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


_IDLE_APPS: dict[tuple[int, int], list[FastAPI]] = {}


@asynccontextmanager
async def started_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """`create_app(settings)` with its lifespan running: a new gateway on these
    settings and their database. The app object itself is kept when its lifespan
    ends and started again by a later test whose settings agree on what the app
    builds in (`fixed_at_build`): FastAPI builds a route's dependency state on the
    first request that reaches it in each app, about 0.1 s per in-process test."""
    idle = _IDLE_APPS.setdefault(fixed_at_build(settings), [])
    app = idle.pop() if idle else create_app(settings)
    app.state.settings = settings
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:
        del app.state.gateway  # a stopped gateway is never reached again
        idle.append(app)


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
    return make_settings(request, tmp_path, db_backend)


def make_settings(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, **overrides: Any
) -> Settings:
    """Settings over a database no other test has touched: a fresh copy of the
    migrated template, or of the test's snapshot if it uses one (`snapshot`).
    A module that overrides `settings` calls this with its `overrides`."""
    snap = _snapshot_of(request, backend, overrides)
    if backend == "postgresql":
        if snap is None:
            url = request.getfixturevalue("pg_database")
        else:
            assert snap.database is not None
            url = pg_database_from(request, snap.database)
        s = fast_settings(tmp_path, database_url=url, **overrides)
    else:
        s = fast_settings(tmp_path, **overrides)
    if snap is not None:
        shutil.copytree(snap.data_dir, s.data_dir)
    elif backend == "postgresql":
        s.data_dir.mkdir(parents=True)
    else:
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
    # A team where everyone may set every agent to work anywhere in any mode:
    # each new agent gets every user as tasker, roots `/**` and ceilings `full`,
    # and each new user becomes a tasker of every agent. Tests of those rules
    # (tests/api/test_tasking.py) set it False before they create anyone.
    open_agents: bool = True

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
        if self.open_agents:
            listed = await self.http.get("/api/v1/admin/agents", headers=self.auth("admin"))
            for agent in listed.json()["items"]:
                added = await self.http.post(
                    f"/api/v1/agents/{agent['name']}/taskers",
                    json={"name": name},
                    headers=self.auth("admin"),
                )
                assert added.status_code == 201, added.text
        return await self.login(name, USER_PASSWORD)

    async def agent(
        self,
        name: str,
        workspaces: list[str] | None = None,
        owners: list[str] | None = None,
        taskers: list[str] | None = None,
        max_mode: dict[str, str] | None = None,
    ) -> str:
        body: dict[str, Any] = {"name": name}
        if self.open_agents:
            users = await self.http.get("/api/v1/admin/users", headers=self.auth("admin"))
            body["taskers"] = [u["username"] for u in users.json()["items"]]
            body["workspaces"] = ["/**"]
            body["max_mode"] = {"owners": "full", "taskers": "full"}
        if workspaces is not None:
            body["workspaces"] = workspaces
        if owners is not None:
            body["owners"] = owners
        if taskers is not None:
            body["taskers"] = taskers
        if max_mode is not None:
            body["max_mode"] = max_mode
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


# --- snapshots: a module's world, built once per backend, copied per test ---

Build = Callable[[Api], Awaitable[Any]]


@dataclass(frozen=True)
class Snapshot:
    """A world built over HTTP and saved: the data dir (SQLite: with its database
    file), the PostgreSQL database used as a template (None on SQLite), the
    tokens the world's principals logged in with (valid in every copy: they are
    rows of the database) and what the build returned."""

    data_dir: Path
    database: str | None
    tokens: dict[str, str]
    value: Any
    value_is_api: bool


_BUILDS: dict[tuple[str, str], Build] = {}  # (module, fixture name) -> build
_BUILT: dict[tuple[str, str, str, str], Snapshot] = {}  # + backend, settings overrides
_IN_USE: dict[str, Snapshot] = {}  # test node id -> its snapshot


def snapshot(build: Build) -> Any:
    """A fixture, named like `build`, for a world that tests share as a starting
    point but never as state: `build(api)` runs once per module and backend (on
    the app of the test's settings, its admin logged in); each test that uses
    the fixture then starts on a fresh copy of the database it left, with its
    tokens in `api.tokens`, and gets a deep copy of what it returned (or the
    test's own `api`, if it returned the api). The build must be deterministic
    in what tests may rely on and keep its state in the database."""
    name = build.__name__
    _BUILDS[(build.__module__, name)] = build

    @pytest.fixture(name=name)
    def fixture(request: pytest.FixtureRequest, settings: Settings) -> Any:
        snap = _IN_USE[request.node.nodeid]
        if snap.value_is_api:
            return request.getfixturevalue("api")
        return copy.deepcopy(snap.value)

    return fixture


def _snapshot_of(
    request: pytest.FixtureRequest, backend: str, overrides: dict[str, Any]
) -> Snapshot | None:
    """The snapshot the test starts from (built now if it is the first), or None."""
    module = request.module.__name__
    names = [n for n in request.fixturenames if (module, n) in _BUILDS]
    if not names:
        return None
    assert len(names) == 1, f"a test starts from one snapshot, not {names}"
    key = (module, names[0], backend, repr(sorted(overrides.items())))
    snap = _BUILT.get(key)
    if snap is None:
        snap = _BUILT[key] = _build(request, _BUILDS[key[:2]], backend, overrides)
    nodeid = request.node.nodeid
    _IN_USE[nodeid] = snap
    request.addfinalizer(lambda: _IN_USE.pop(nodeid, None))
    return snap


def _build(
    request: pytest.FixtureRequest, build: Build, backend: str, overrides: dict[str, Any]
) -> Snapshot:
    root = request.getfixturevalue("tmp_path_factory").mktemp("snapshot")
    database = None
    if backend == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        database = fresh_database(cluster, request.getfixturevalue("pg_template"))
        settings = fast_settings(root, database_url=cluster.url(database), **overrides)
        settings.data_dir.mkdir(parents=True)
    else:
        settings = fast_settings(root, **overrides)
        copy_template(request.getfixturevalue("template_db"), settings.data_dir)

    async def run() -> Snapshot:
        async with started_app(settings) as app:  # its end disposes the engine
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                a = Api(http)
                await a.login("admin", ADMIN_PASSWORD)
                value = await build(a)
        is_api = value is a
        return Snapshot(
            settings.data_dir, database, dict(a.tokens), None if is_api else value, is_api
        )

    return anyio.run(run)


@pytest.fixture
async def api(settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """The app in-process (httpx ASGI transport) over a real SQLite file."""
    async with started_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            a = Api(http)
            snap = _IN_USE.get(request.node.nodeid)
            if snap is None:
                await a.login("admin", ADMIN_PASSWORD)
            else:  # the snapshot's tokens are rows of this copy of its database
                a.tokens.update(snap.tokens)
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


@asynccontextmanager
async def admin_api(url: str) -> AsyncIterator[Api]:
    """An Api on the gateway process at `url`, its admin logged in (over HTTP)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        a = Api(http)
        await a.login("admin", ADMIN_PASSWORD)
        yield a


@pytest.fixture
async def live(gateway_process: GatewayProcess) -> AsyncIterator[Api]:
    async with admin_api(gateway_process.url) as a:
        yield a


# --- the fast tier (`make check`): no subprocess, browser, agent CLI or PostgreSQL ---

FAST_TIER = os.environ.get("AGENTMAIL_TEST_TIER", "") == "fast"
# Whole folders of tests that start processes: gateways, bridges, hooks, the CLI.
_PROCESS_FOLDERS = (
    "tests/bridge/", "tests/hooks/", "tests/cli/", "tests/e2e/", "tests/install/",
)  # fmt: skip
_PROCESS_FIXTURES = {"gateway_process", "live", "shared_gateway", "browser", "page"}


def _needs_processes(item: pytest.Item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    if path.startswith(_PROCESS_FOLDERS) or "test_browser" in path:
        return True
    if item.get_closest_marker("e2e") or item.get_closest_marker("slow"):
        return True
    return bool(_PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """AGENTMAIL_TEST_TIER=fast (`make check`) deselects — never skips — every test
    that starts a process; CI (`make test`) runs them all. A test of the fast tier
    that starts one anyway fails (`_no_processes_in_the_fast_tier`): mark it e2e."""
    if not FAST_TIER:
        return
    keep = [i for i in items if not _needs_processes(i)]
    dropped = [i for i in items if _needs_processes(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(autouse=True)
def _no_processes_in_the_fast_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    if not FAST_TIER:
        return
    import subprocess

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(
            "the fast tier (make check) starts no process: mark this test e2e "
            "(tests/conftest.py, FAST_TIER)"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


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


def pytest_configure(config: pytest.Config) -> None:
    """The suite's log folder (tests/log_secrets.py): made by the controlling
    process, inherited by the xdist workers, searched at the end of the run."""
    import tempfile

    from tests import log_secrets

    if not os.environ.get(log_secrets.TEST_LOGS_ENV):
        folder = tempfile.mkdtemp(prefix="agentmail-test-logs-")
        os.environ[log_secrets.TEST_LOGS_ENV] = folder
        config.stash[_OWN_LOG_FOLDER] = folder
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    log_secrets.capture_in_process(Path(os.environ[log_secrets.TEST_LOGS_ENV]), worker)


_OWN_LOG_FOLDER = pytest.StashKey[str]()


def _search_logs(session: pytest.Session) -> None:
    """Zero secrets in every log of the run, or the run fails (tests/log_secrets.py)."""
    if hasattr(session.config, "workerinput"):
        return  # a worker: the controller searches once every worker is done
    from tests import log_secrets

    folder = Path(os.environ[log_secrets.TEST_LOGS_ENV])
    files, hits = log_secrets.scan(folder)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if hits:
        if reporter is not None:
            reporter.write_line(
                f"log secrets: {len(hits)} line(s) in {folder} hold a secret:", red=True
            )
            for hit in hits[:50]:
                reporter.write_line(f"  {hit}", red=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
        return
    if reporter is not None and files:
        reporter.write_line(f"log secrets: {files} log file(s) searched, no secret found")
    if session.config.stash.get(_OWN_LOG_FOLDER, None) == str(folder):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _search_logs(session)
    if os.environ.get("CI", "").lower() == "true":
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", {}) if reporter is not None else {}
        if stats.get("skipped") and session.exitstatus == 0:
            session.exitstatus = 1
