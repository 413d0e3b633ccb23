"""Install without a clone (docs/install.md): the wheel and sdist of `python -m
build` carry every file the package reads, and the wheel installed in a fresh
virtualenv, or with pipx, runs the gateway (migrations, web pages, static files)
and a command-runner bridge with no source tree on the path.

The wheel is built once per module (per xdist worker: the module stays on one)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import tarfile
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from mailui4agents.db import migrate
from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess
from tests.bridge.harness import FAKE_AGENT, BridgeProcess, Human
from tests.conftest import ADMIN_PASSWORD
from tests.install.installs import (
    PACKAGE,
    REPO,
    Installed,
    build,
    install_in_venv,
    install_with_pipx,
    install_with_uv,
    outside_env,
    package_files,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    wheel, sdist = build(REPO, tmp_path_factory.mktemp("dist") / "out")
    assert sdist is not None
    return wheel, sdist


def test_the_wheel_and_the_sdist_carry_every_file_of_the_package(dist: tuple[Path, Path]) -> None:
    wheel, sdist = dist
    wanted = package_files()
    # The data files are what a setuptools glob forgets: make sure they are counted.
    assert {
        "mailui4agents/web/templates/login.html",
        "mailui4agents/web/static/app.css",
        "mailui4agents/db/migrations/env.py",
        "mailui4agents/db/migrations/script.py.mako",
        f"mailui4agents/db/migrations/versions/{_newest_migration()}",
        "mailui4agents/bridge/runners/assets/pi-agentmail.ts",
    } <= wanted
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = set(zf.namelist())
    assert sorted(wanted - in_wheel) == []
    # Nothing of the repository besides the package (no tests, no docs).
    assert {n.split("/")[0] for n in in_wheel} == {
        "mailui4agents",
        f"mailui4agents-{_version()}.dist-info",
    }
    with tarfile.open(sdist) as tf:
        top = f"mailui4agents-{_version()}/src/"
        in_sdist = {m.name.removeprefix(top) for m in tf.getmembers() if m.name.startswith(top)}
    assert sorted(wanted - in_sdist) == []


def _version() -> str:
    from mailui4agents import __version__

    return __version__


def _newest_migration() -> str:
    names = sorted(p.name for p in (PACKAGE / "db/migrations/versions").glob("[0-9]*_*.py"))
    return names[-1]


@pytest.fixture(scope="module", params=["venv", "pipx", "uv"])
def installed(
    request: pytest.FixtureRequest,
    dist: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Installed:
    where = tmp_path_factory.mktemp(f"install-{request.param}")
    if request.param == "venv":
        return install_in_venv(dist[0], where / "venv")
    if request.param == "uv":
        return install_with_uv(dist[0], where)
    return install_with_pipx(dist[0], where)


@pytest.fixture
def gateway(installed: Installed, tmp_path: Path) -> Iterator[GatewayProcess]:
    env = outside_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    gp = GatewayProcess(
        data_dir=tmp_path / "data", env=env, command=[str(installed.agentmail)], cwd=tmp_path
    )
    gp.start(timeout=60)
    try:
        yield gp
    finally:
        gp.stop()


@pytest.fixture
async def admin(gateway: GatewayProcess) -> AsyncIterator[Human]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        assert r.status_code == 200, r.text
        token = r.json()["token"]
        yield Human(http, token, token, name="admin")


def test_the_install_imports_its_own_copy(installed: Installed, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(installed.python), "-c", "import mailui4agents; print(mailui4agents.__file__)"],
        cwd=tmp_path,
        env=outside_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    where = Path(done.stdout.strip()).resolve()
    assert "site-packages" in where.parts, where
    assert not where.is_relative_to(REPO), where


async def test_serve_migrates_and_serves_the_web_pages_and_static_files(
    gateway: GatewayProcess, admin: Human
) -> None:
    with sqlite3.connect(gateway.data_dir / "agentmail.db") as db:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision == migrate.head_revision()
    http = admin.http
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    login = await http.get("/login")
    assert login.status_code == 200
    assert 'name="password"' in login.text
    linked = set(re.findall(r"/static/([\w.-]+)", login.text))
    assert any(n.endswith(".css") for n in linked), linked
    for public in sorted(linked):
        r = await http.get(f"/static/{public}")
        assert r.status_code == 200, public
        stem, _digest, suffix = public.rsplit(".", 2)
        assert r.content == (PACKAGE / "web/static" / f"{stem}.{suffix}").read_bytes(), public
    # The web app's own files (PWA): the service worker and its manifest.
    assert (await http.get("/sw.js")).status_code == 200
    assert (await http.get("/manifest.webmanifest")).status_code == 200


async def test_a_command_runner_bridge_of_the_install_runs_an_approved_command(
    installed: Installed, gateway: GatewayProcess, admin: Human, tmp_path: Path
) -> None:
    agent = await admin.new_agent(tmp_path / "agent", gateway.url)
    # The fake agent CLI runs on the install's interpreter: its `agentmail hook
    # generic` (python -m mailui4agents.cli.main) is the installed one too.
    bridge = BridgeProcess(
        [
            "--agent", agent.name, "--runner", "command", "--state-dir", str(agent.state_dir),
            "--retry-delay", "0.2", "--workspace-root", f"{agent.workspace.parent}/**",
            # Unconfined, as tests/bridge/harness.py runs bridges: a proven sandbox
            # would let the command run without asking (docs/sandbox.md).
            "--no-sandbox",
            "--", str(installed.python), str(FAKE_AGENT),
        ],
        outside_env(
            AGENTMAIL_URL=gateway.url,
            AGENTMAIL_KEY=agent.key,
            FAKE_AGENT_LOG=str(agent.log_path),
            FAKE_AGENT_STATE=str(agent.fake_state),
        ),
        entry=(),
        executable=str(installed.agentmail),
        cwd=tmp_path,
    )  # fmt: skip
    bridge.start(timeout=60)
    try:
        sent = await admin.send(
            f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
        )
        request = await admin.wait_pending(sent["session_id"])
        assert request["tool_name"] == "Bash"
        assert not (agent.workspace / "marker.txt").exists()
        await admin.decide(request["id"], "approve")
        reply = await admin.wait_reply(sent["session_id"], sent["id"])
        assert (agent.workspace / "marker.txt").read_text() == "hi\n"
        assert "ran [echo hi > marker.txt]" in reply["body"]
    finally:
        bridge.kill()
        (tmp_path / "bridge.log").write_text(bridge.log)
