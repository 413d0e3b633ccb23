"""Browser tests: Playwright for Python driving the system Chromium against one
real `agentmail serve` subprocess shared by the browser modules of the test run
(scripts/install-test-deps.sh installs Chromium and axe-core; under CI=true a
missing browser fails, never skips).

What is shared, and why it is safe: the gateway (every test makes its own
principals, their names suffixed with a random hex, and changes no setting), and
per module one browser, in which every test opens fresh contexts (no cookie,
storage or permission carries over)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD, copy_template
from tests.needs import missing

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / ".cache/axe-core-4.14.1/node_modules/axe-core/axe.min.js"
ARTIFACTS = ROOT / "test-artifacts" / "web"
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 900}


def _require(path: Path, what: str) -> None:
    if path.exists():
        return
    missing(f"{what} missing ({path}): run scripts/install-test-deps.sh")


@dataclass
class Web:
    """The gateway's URL plus an API client (admin) to set up worlds."""

    url: str
    http: httpx.Client
    tokens: dict[str, str] = field(default_factory=dict)

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    def login(self, name: str, password: str = USER_PASSWORD) -> None:
        r = self.http.post("/api/v1/auth/login", json={"username": name, "password": password})
        r.raise_for_status()
        self.tokens[name] = r.json()["token"]

    def user(self, prefix: str, *, is_admin: bool = False) -> str:
        name = f"{prefix}{uuid.uuid4().hex[:6]}"
        r = self.http.post(
            "/api/v1/admin/users",
            json={"username": name, "password": USER_PASSWORD, "is_admin": is_admin},
            headers=self.auth("admin"),
        )
        assert r.status_code == 201, r.text
        # A team: every user may set every agent to work (docs/access.md).
        for agent in self.http.get("/api/v1/admin/agents", headers=self.auth("admin")).json()[
            "items"
        ]:
            added = self.http.post(
                f"/api/v1/agents/{agent['name']}/taskers",
                json={"name": name},
                headers=self.auth("admin"),
            )
            assert added.status_code == 201, added.text
        self.login(name)
        return name

    def agent(self, prefix: str) -> str:
        name = f"{prefix}{uuid.uuid4().hex[:6]}"
        users = self.http.get("/api/v1/admin/users", headers=self.auth("admin")).json()["items"]
        team = {
            "name": name,
            "taskers": [u["username"] for u in users],
            "workspaces": ["/**"],
            "max_mode": {"owners": "full", "taskers": "full"},
        }
        r = self.http.post("/api/v1/admin/agents", json=team, headers=self.auth("admin"))
        assert r.status_code == 201, r.text
        self.tokens[name] = r.json()["key"]
        return name

    def send(self, sender: str, to: list[str], **body: Any) -> dict[str, Any]:
        path = (
            "/api/v1/mail" if self.tokens[sender].startswith("am_user_") else "/api/v1/agent/mail"
        )
        r = self.http.post(
            path, json={"to": to, "subject": "s", "body": "b", **body}, headers=self.auth(sender)
        )
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out

    def ask(self, agent: str, session_id: str, **body: Any) -> dict[str, Any]:
        r = self.http.post(
            "/api/v1/agent/permissions",
            json={"session_id": session_id, "relay_key": uuid.uuid4().hex, **body},
            headers=self.auth(agent),
        )
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out

    def session_with(self, human: str, agent: str, mode: str = "workspace") -> dict[str, Any]:
        """`human` starts a session with `agent` (so `human` owns and decides it)."""
        ws = f"/srv/{uuid.uuid4().hex[:6]}"
        return self.send(human, [f"{agent}@{ws}.new"], subject="Work", permission_mode=mode)


@pytest.fixture(scope="session")
def web(tmp_path_factory: pytest.TempPathFactory, template_db: Path) -> Iterator[Web]:
    """The gateway of every browser module in this process (on a copy of the
    migrated template: its start skips the migrations)."""
    env = clean_env(
        AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD,
        AGENTMAIL_LOGIN_FAILURES_PER_USER="3",
        **FAST_HASH_ENV,
    )
    data_dir = tmp_path_factory.mktemp("web") / "data"
    copy_template(template_db, data_dir)
    gp = GatewayProcess(data_dir=data_dir, env=env)
    gp.start()
    try:
        with httpx.Client(base_url=gp.url, timeout=30) as http:
            w = Web(gp.url, http)
            w.login("admin", ADMIN_PASSWORD)
            yield w
    finally:
        gp.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per module (Playwright's sync API runs its own event loop
    while it is open: closed with the module, it is out of other modules' way)."""
    _require(Path(CHROMIUM), "system Chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def contexts(browser: Any) -> Iterator[Any]:
    """Browser contexts a test opens (one per person); closed when it ends."""
    made: list[Any] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def axe_source() -> str:
    _require(AXE, "axe-core")
    return AXE.read_text()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
