"""One real gateway per test module; each test makes its own agent and bridges.
Also the pieces of the real-Claude-Code tests: the CLI, the deciding owner and a
tmux terminal whose last screen is kept for a failing test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.bridge.agent_clis import require
from tests.bridge.harness import Agent, Human
from tests.bridge.tmux import Terminal
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV)
    gp = GatewayProcess(data_dir=tmp_path_factory.mktemp("gw") / "data", env=env)
    gp.start()
    try:
        with httpx.Client(base_url=gp.url, timeout=30) as http:
            r = http.post(
                "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
            )
            admin = r.json()["token"]
            r = http.post(
                "/api/v1/admin/users",
                json={"username": "ana", "password": USER_PASSWORD},
                headers={"Authorization": f"Bearer {admin}"},
            )
            assert r.status_code == 201, r.text
        yield gp
    finally:
        gp.stop()


@pytest.fixture
async def human(gateway: GatewayProcess) -> AsyncIterator[Human]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        r = await http.post(
            "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        admin = r.json()["token"]
        r = await http.post(
            "/api/v1/auth/login", json={"username": "ana", "password": USER_PASSWORD}
        )
        yield Human(http, r.json()["token"], admin)


@pytest.fixture
async def agent(human: Human, gateway: GatewayProcess, tmp_path: Path) -> AsyncIterator[Agent]:
    a = await human.new_agent(tmp_path, gateway.url)
    try:
        yield a
    finally:
        for n, bridge in enumerate(a.bridges):
            bridge.kill()
            (tmp_path / f"bridge-{n}.log").write_text(bridge.log)  # for a failing test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing bridge test shows what its bridges printed and what its fake
    agent recorded (the tail of each), in the report itself: CI keeps no
    temporary directories, and a real CLI that timed out says why only there."""
    report = yield
    agent = getattr(item, "funcargs", {}).get("agent")
    if not report.failed or not isinstance(agent, Agent):
        return report
    for n, bridge in enumerate(agent.bridges):
        report.sections.append((f"bridge {n} output (tail)", bridge.log[-6000:]))
    if agent.log_path.exists():
        report.sections.append(("fake agent records (tail)", agent.log_path.read_text()[-3000:]))
    return report


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return require("@anthropic-ai/claude-code")


@pytest.fixture
def owner(human: Human) -> Human:
    """The agent's owner (the harness's agents belong to admin), who decides."""
    return Human(human.http, human.admin_token, human.admin_token, name="admin")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path / "tmux.sock")
    try:
        yield term
    finally:
        (tmp_path / "screen.txt").write_text(term.screen())  # for a failing test
        term.close()
