"""``agentmail permissions | approve | deny | answer | grants | revoke`` end to end.

The real ``agentmail`` script runs as a subprocess against the real gateway
(one per module, ``shared_gateway``). The agent's side is plain HTTP with the agent key, as a
hook or bridge would do it: ana mails ``claude-N@/srv/shop.new`` to open a
session, claude asks in it, ana decides from the command line, and the agent
reads the outcome back through ``GET /api/v1/agent/permissions/{id}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

from mailui4agents import testing
from mailui4agents.cli import approvals
from mailui4agents.cli.auth import save_login
from mailui4agents.client.config import config_path
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e]

_SCRIPT = Path(sys.executable).with_name("agentmail")
AGENTMAIL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mailui4agents.cli.main"]
CLI_TIMEOUT = 30.0


@dataclass
class Cli:
    """One principal's ``agentmail``: its own config directory and environment."""

    url: str
    config_home: Path
    env: dict[str, str]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AGENTMAIL, *args],
            env=testing.clean_env(
                XDG_CONFIG_HOME=str(self.config_home), AGENTMAIL_URL=self.url, **self.env
            ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=CLI_TIMEOUT,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self(*args)
        assert result.returncode == 0, f"agentmail {' '.join(args)}: {result.stderr}"
        assert "Traceback" not in result.stderr
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").stdout)


@dataclass
class World:
    """The gateway, ana (CLI, logged in) and claude (an HTTP client with its key).

    Every test gets its own person and agent (ana-N, claude-N) on the module's one
    gateway, so it starts from a session, requests and grants no other test saw."""

    ana: Cli
    ana_name: str  # unique per test: the module shares one gateway
    agent_name: str
    claude_cli: Cli  # the same agent key, used to show the CLI refuses it
    agent: httpx.Client
    session_id: str
    session_alias: str
    _keys: Iterator[int]

    def ask(self, **body: Any) -> dict[str, Any]:
        """claude opens a request in the session: an approval of Bash by default."""
        payload = {
            "session_id": self.session_id,
            "kind": "approval",
            "tool_name": "Bash",
            "tool_input": {"command": "npm test"},
            "relay_key": f"relay-{next(self._keys)}",
            **body,
        }
        payload = {name: value for name, value in payload.items() if value is not None}
        r = self.agent.post("/api/v1/agent/permissions", json=payload)
        assert r.status_code == 201, r.text
        created: dict[str, Any] = r.json()
        return created

    def question(self, question: str, options: list[str] | None, **extra: Any) -> dict[str, Any]:
        return self.ask(
            kind="question",
            tool_name=None,
            tool_input=None,
            question=question,
            options=[{"label": label} for label in options] if options is not None else None,
            **extra,
        )

    def seen_by_agent(self, request_id: str) -> dict[str, Any]:
        r = self.agent.get(f"/api/v1/agent/permissions/{request_id}")
        assert r.status_code == 200, r.text
        seen: dict[str, Any] = r.json()
        return seen


_PEOPLE = count(1)


@pytest.fixture
def world(shared_gateway: GatewayProcess, tmp_path: Path) -> Iterator[World]:
    url = shared_gateway.url
    n = next(_PEOPLE)
    ana_name, agent_name = f"ana-{n}", f"claude-{n}"
    with httpx.Client(base_url=url, timeout=30) as http:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        admin = {
            "Authorization": f"Bearer {http.post('/api/v1/auth/login', json=login).json()['token']}"
        }
        r = http.post(
            "/api/v1/admin/users",
            json={"username": ana_name, "password": USER_PASSWORD},
            headers=admin,
        )
        assert r.status_code == 201, r.text
        # ana may set it to work (docs/access.md); the admin owns it.
        created = {"name": agent_name, "taskers": [ana_name], "workspaces": ["/**"]}
        r = http.post("/api/v1/admin/agents", json=created, headers=admin)
        assert r.status_code == 201, r.text
        key = r.json()["key"]

        # ana's stored token, as `agentmail login` leaves it (cli/auth.save_login), and
        # her first mail, both over HTTP: what is under test is deciding from the CLI.
        login = {"username": ana_name, "password": USER_PASSWORD}
        token = http.post("/api/v1/auth/login", json=login).json()["token"]
        ana = Cli(url, tmp_path / "xdg-ana", {})
        save_login(url, ana_name, token, config_path({"XDG_CONFIG_HOME": str(ana.config_home)}))
        r = http.post(
            "/api/v1/mail",
            json={"to": [f"{agent_name}@/srv/shop.new"], "subject": "Fix login", "body": "please"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 201, r.text
        sent = r.json()
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}
    ) as agent:
        yield World(
            ana=ana,
            ana_name=ana_name,
            agent_name=agent_name,
            claude_cli=Cli(url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": key}),
            agent=agent,
            session_id=sent["session_id"],
            session_alias=sent["session_alias"],
            _keys=count(1),
        )


# -- permissions --------------------------------------------------------------------------


def test_permissions_lists_the_pending_request_with_agent_session_and_command(
    world: World,
) -> None:
    request = world.ask(tool_input={"command": "npm test -- --watch=false"})

    listing = world.ana.ok("permissions").stdout

    [line] = listing.splitlines()
    assert request["id"] in line
    assert world.agent_name in line
    assert world.session_alias in line
    assert "Bash: npm test -- --watch=false" in line
    assert [r["id"] for r in world.ana.json("permissions")] == [request["id"]]
    assert world.ana.json("permissions", "--decided") == []
    assert "No requests." in world.ana.ok("permissions", "--decided").stdout
    only_here = world.ana.json("permissions", "--session", world.session_id)
    assert [r["id"] for r in only_here] == [request["id"]]


def test_all_and_decided_cannot_be_combined(world: World) -> None:
    result = world.ana("permissions", "--all", "--decided")

    assert result.returncode == 2
    assert "--all or --decided" in result.stderr


# -- approve / deny -----------------------------------------------------------------------


def test_approve_with_a_note_reaches_the_agent(world: World) -> None:
    request = world.ask()

    result = world.ana.ok("approve", request["id"], "--note", "go ahead, tests only")

    assert f"Approved {request['id']}" in result.stdout
    assert "Granted" not in result.stdout
    seen = world.seen_by_agent(request["id"])
    assert seen["status"] == "approved"
    assert seen["note"] == "go ahead, tests only"
    assert seen["decided_by"] == world.ana_name
    assert seen["grant_id"] is None
    assert world.ana.json("permissions") == []
    decided = world.ana.ok("permissions", "--decided").stdout
    assert request["id"] in decided and f"approved by {world.ana_name}" in decided


def test_deciding_twice_is_a_gateway_error_on_stderr_exit_1(world: World) -> None:
    request = world.ask()
    world.ana.ok("approve", request["id"])

    again = world.ana("deny", request["id"], "--note", "changed my mind")

    assert again.returncode == 1
    assert again.stderr.startswith(f"error: request {request['id']} already decided by ")
    assert again.stderr.rstrip().endswith(" s ago: approved"), again.stderr
    assert "Traceback" not in again.stderr
    assert world.seen_by_agent(request["id"])["status"] == "approved"


def test_deny_needs_a_note(world: World) -> None:
    request = world.ask(tool_input={"command": "rm -rf node_modules"})

    bare = world.ana("deny", request["id"])
    blank = world.ana("deny", request["id"], "--note", "  ")

    assert bare.returncode == 2 and "--note" in bare.stderr
    assert blank.returncode == 2 and "--note" in blank.stderr
    assert world.seen_by_agent(request["id"])["status"] == "pending"

    result = world.ana.ok("deny", request["id"], "--note", "use npm ci instead")

    assert f"Denied {request['id']}" in result.stdout
    seen = world.seen_by_agent(request["id"])
    assert seen["status"] == "denied" and seen["note"] == "use npm ci instead"


# -- grants -------------------------------------------------------------------------------


def test_always_with_a_pattern_creates_a_grant_that_revoke_removes(world: World) -> None:
    request = world.ask()

    result = world.ana.ok("approve", request["id"], "--always", "--pattern", "npm")

    seen = world.seen_by_agent(request["id"])
    assert seen["status"] == "approved" and seen["grant_id"]
    grant_id = seen["grant_id"]
    assert "Granted: always allow Bash: `npm` and what follows it" in result.stdout
    assert grant_id in result.stdout
    [grant] = world.ana.json("grants")
    assert grant["id"] == grant_id
    assert (grant["tool_name"], grant["pattern"]) == ("Bash", "npm")
    assert grant["session_id"] == world.session_id
    assert grant_id in world.ana.ok("grants", "--session", world.session_id).stdout
    # The grant works: the next npm command is approved without asking.
    assert world.ask(tool_input={"command": "npm run build"})["status"] == "approved"

    revoked = world.ana.ok("revoke", grant_id)

    assert f"Revoked grant {grant_id}" in revoked.stdout
    assert world.ana.json("grants") == []
    assert "No grants." in world.ana.ok("grants").stdout
    assert world.ask(tool_input={"command": "npm run build"})["status"] == "pending"


def test_always_without_a_pattern_grants_the_approved_command_only(world: World) -> None:
    request = world.ask()

    result = world.ana.ok("approve", request["id"], "--always")

    assert "Granted: always allow Bash: exactly `npm test`" in result.stdout
    [grant] = world.ana.json("grants")
    assert (grant["scope"], grant["pattern"]) == ("exact", "npm test")
    assert "always allow Bash: exactly `npm test`" in world.ana.ok("grants").stdout
    assert world.ask(tool_input={"command": "npm test"})["status"] == "approved"
    assert world.ask(tool_input={"command": "npm test --watch"})["status"] == "pending"


def test_pattern_alone_implies_always(world: World) -> None:
    request = world.ask()

    world.ana.ok("approve", request["id"], "--pattern", "npm test")

    [grant] = world.ana.json("grants")
    assert grant["pattern"] == "npm test"


# -- answer -------------------------------------------------------------------------------


def test_answer_with_an_option(world: World) -> None:
    asked = world.question("Which database?", ["staging", "prod"])
    assert "question: Which database? [staging | prod]" in world.ana.ok("permissions").stdout

    result = world.ana.ok("answer", asked["id"], "--option", "staging")

    assert f"Answered {asked['id']}: staging" in result.stdout
    seen = world.seen_by_agent(asked["id"])
    assert seen["status"] == "approved" and seen["answers"] == ["staging"]


def test_answer_with_several_options_for_a_multi_select_question(world: World) -> None:
    asked = world.question("Which checks?", ["lint", "types", "tests"], multi_select=True)

    world.ana.ok("answer", asked["id"], "--option", "lint", "--option", "tests")

    assert world.seen_by_agent(asked["id"])["answers"] == ["lint", "tests"]


def test_answer_with_free_text(world: World) -> None:
    asked = world.question("Branch name?", None)

    world.ana.ok("answer", asked["id"], "--text", "fix/login")

    seen = world.seen_by_agent(asked["id"])
    assert seen["status"] == "approved" and seen["answers"] == ["fix/login"]


def test_an_unknown_option_exits_1_naming_it(world: World) -> None:
    asked = world.question("Which database?", ["staging", "prod"])

    result = world.ana("answer", asked["id"], "--option", "dev")

    assert result.returncode == 1
    assert "'dev'" in result.stderr and "staging" in result.stderr
    assert world.seen_by_agent(asked["id"])["status"] == "pending"


@pytest.mark.parametrize(
    ("options", "text", "needs"),
    [(["staging"], None, "--text"), ([], "staging", "--option")],
)
def test_the_wrong_kind_of_answer_exits_1_saying_which_to_use(
    world: World, options: list[str], text: str | None, needs: str
) -> None:
    free = world.question("Branch name?", None)
    choice = world.question("Which database?", ["staging", "prod"])
    target = free if text is None else choice
    args = [arg for label in options for arg in ("--option", label)]
    if text is not None:
        args += ["--text", text]

    result = world.ana("answer", target["id"], *args)

    assert result.returncode == 1
    assert needs in result.stderr
    assert world.seen_by_agent(target["id"])["status"] == "pending"


@pytest.mark.parametrize(
    "args", [["--option", "staging", "--text", "staging"], []], ids=["both", "neither"]
)
def test_answer_needs_exactly_one_of_option_and_text(world: World, args: list[str]) -> None:
    asked = world.question("Which database?", ["staging", "prod"])

    result = world.ana("answer", asked["id"], *args)

    assert result.returncode == 2
    assert "--option" in result.stderr and "--text" in result.stderr
    assert world.seen_by_agent(asked["id"])["status"] == "pending"


def test_answering_an_approval_request_points_at_approve_and_deny(world: World) -> None:
    request = world.ask()

    result = world.ana("answer", request["id"], "--text", "yes")

    assert result.returncode == 1
    assert "agentmail approve" in result.stderr
    assert world.seen_by_agent(request["id"])["status"] == "pending"


def test_approving_a_question_points_at_answer(world: World) -> None:
    asked = world.question("Which database?", ["staging", "prod"])

    result = world.ana("approve", asked["id"])

    assert result.returncode == 1
    assert f"agentmail answer {asked['id']}" in result.stderr


# -- who may decide -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["permissions"],
        ["approve", "{id}"],
        ["deny", "{id}", "--note", "no"],
        ["answer", "{id}", "--text", "x"],
        ["grants"],
        ["revoke", "{id}"],
    ],
    ids=lambda command: command[0],
)
def test_an_agent_key_is_refused_with_a_clear_message(world: World, command: list[str]) -> None:
    request = world.ask()

    result = world.claude_cli(*(arg.format(id=request["id"]) for arg in command))

    assert result.returncode == 1
    assert "agent key" in result.stderr and "person" in result.stderr
    assert "Traceback" not in result.stderr
    assert world.seen_by_agent(request["id"])["status"] == "pending"


def test_an_agent_key_passed_as_a_token_is_refused_too(world: World) -> None:
    key = world.claude_cli.env["AGENTMAIL_KEY"]
    disguised = Cli(world.ana.url, world.claude_cli.config_home, {"AGENTMAIL_TOKEN": key})

    result = disguised("permissions")

    assert result.returncode == 1 and "agent key" in result.stderr


def test_without_any_credential_it_says_how_to_log_in(world: World, tmp_path: Path) -> None:
    nobody = Cli(world.ana.url, tmp_path / "xdg-nobody", {})

    result = nobody("permissions")

    assert result.returncode == 1 and "agentmail login" in result.stderr


# -- pure formatting (no gateway) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("created", "shown"),
    [
        ("2025-01-02T03:04:50Z", "10s"),
        ("2025-01-02T03:00:00Z", "5m"),
        ("2025-01-01T23:05:00+00:00", "4h"),
        ("2024-12-30T03:05:00Z", "3d"),
        ("2025-01-02T03:06:00Z", "0s"),  # a clock slightly ahead is not negative
        ("yesterday", "?"),
        (None, "?"),
    ],
)
def test_age_is_short(created: str | None, shown: str) -> None:
    now = datetime(2025, 1, 2, 3, 5, 0, tzinfo=UTC)

    assert approvals.age(created, now) == shown


@pytest.mark.parametrize(
    ("grant", "text"),
    [
        ({"tool_name": "Bash", "pattern": None}, "always allow Bash: every Bash command"),
        ({"tool_name": "Bash", "pattern": "npm"}, "Bash: `npm` and what follows it"),
        ({"tool_name": "Write", "pattern": "/srv/shop"}, "Write: files under /srv/shop"),
        (
            {"tool_name": "Bash", "pattern": "npm test", "scope": "exact"},
            "always allow Bash: exactly `npm test`",
        ),
        ({"tool_name": "Bash", "covers": "words from the gateway"}, "Bash: words from the gateway"),
        (
            {"tool_name": "Bash", "scope": "every", "legacy_every_input": True},
            "every Bash command (an older grant without a pattern, which covers every input",
        ),
    ],
)
def test_grant_text_says_what_the_pattern_covers(grant: dict[str, Any], text: str) -> None:
    assert text in approvals.grant_text(grant)


# -- deciders and agent owners ------------------------------------------------------------


def test_deciders_lists_the_owner_and_an_owner_adds_and_removes_one(
    world: World, tmp_path: Path
) -> None:
    ana, dora = world.ana_name, f"dora-{world.ana_name}"
    owners = world.ana.json("deciders", world.session_id)
    assert [(d["name"], d["role"]) for d in owners] == [(ana, "owner")]
    admin = Cli(world.ana.url, tmp_path / "xdg-admin", {})
    admin.ok("login", "--username", "admin", "--password", ADMIN_PASSWORD)
    admin.ok("user", "add", dora, "--password", USER_PASSWORD)
    added = world.ana.json("deciders", world.session_id, "--add", dora)
    assert [(d["name"], d["role"]) for d in added] == [(ana, "owner"), (dora, "decider")]
    # The admin reads the session but is no owner: it cannot name deciders.
    refused = admin("deciders", world.session_id, "--add", "admin")
    assert refused.returncode != 0
    assert "owners" in refused.stderr
    out = world.ana.ok("deciders", world.session_id, "--remove", dora).stdout
    assert out.split() == [ana, "owner"]


def test_agent_owners_are_shown_and_changed_by_an_admin(world: World, tmp_path: Path) -> None:
    ana, claude, pi = world.ana_name, world.agent_name, f"pi-{world.ana_name}"
    admin = Cli(world.ana.url, tmp_path / "xdg-admin", {})
    admin.ok("login", "--username", "admin", "--password", ADMIN_PASSWORD)
    assert [o["username"] for o in admin.json("agent", "owners", claude)] == ["admin"]
    after = admin.json("agent", "owners", claude, "--add", ana)
    assert sorted(o["username"] for o in after) == ["admin", ana]
    assert [o["username"] for o in admin.json("agent", "owners", claude, "--remove", "admin")] == [
        ana
    ]
    created = admin.json("agent", "add", pi, "--owner", ana)
    assert created["name"] == pi
    assert [o["username"] for o in admin.json("agent", "owners", pi)] == [ana]
    # A person who is not an admin cannot see or change owners.
    assert world.ana("agent", "owners", claude).returncode != 0


def test_an_owner_sets_taskers_roots_and_ceilings_from_the_command_line(
    world: World, tmp_path: Path
) -> None:
    """`agent add --workspace --tasker`, `agent taskers`, `agent set`: for the
    agent's owners (not only admins); anyone else exits non-zero."""
    ana, bot = world.ana_name, f"bot-{world.ana_name}"
    admin = Cli(world.ana.url, tmp_path / "xdg-admin", {})
    admin.ok("login", "--username", "admin", "--password", ADMIN_PASSWORD)
    added = admin("agent", "add", bot, "--owner", ana)
    assert added.returncode == 0, added.stderr
    assert "works nowhere until an owner sets them" in added.stderr  # no roots given
    # ana owns bot: she manages it without being an admin.
    shown = world.ana.json("agent", "set", bot)
    assert shown["workspaces"] == [] and shown["max_mode"] == {
        "owners": "full",
        "taskers": "workspace",
    }
    out = world.ana.json(
        "agent", "set", bot, "--workspace", "/srv/*", "--workspace", "/home/x/**",
        "--max-mode-taskers", "plan",
    )  # fmt: skip
    assert out["workspaces"] == ["/srv/*", "/home/x/**"]
    assert out["max_mode"]["taskers"] == "plan"
    listed = world.ana.json("agent", "taskers", bot, "--add", "admin")
    assert [(t["name"], t["role"]) for t in listed] == [(ana, "owner"), ("admin", "tasker")]
    text = world.ana.ok("agent", "taskers", bot, "--remove", "admin").stdout
    assert f"{ana}  owner" in text and "admin" not in text.replace("added by admin", "")
    assert world.ana.json("agent", "set", bot, "--no-workspaces")["workspaces"] == []
    # The agent's own key, and the admin for another's agent only as admin: the
    # agent cannot widen its own roots.
    refused = world.claude_cli("agent", "set", bot, "--workspace", "/**")
    assert refused.returncode != 0
    bad = world.ana("agent", "set", bot, "--max-mode-owners", "root")
    assert bad.returncode == 2 and "root" in bad.stderr
