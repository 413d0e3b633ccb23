"""``agentmail rules list | add | rm | enable | disable | accept`` end to end: the
real ``agentmail`` script against a real gateway (docs/rules.md). The agent's
side is plain HTTP with its key, as a hook would send it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.cli.test_cli_approvals import Cli
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD

from mailui4agents.cli.approvals import NOT_A_PERSON
from mailui4agents.cli.auth import save_login
from mailui4agents.client.config import config_path
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e]

_PEOPLE = count(1)


@dataclass
class World:
    ana: Cli  # owns the agent, whose root is the workspace
    bob: Cli  # another person
    claude_cli: Cli  # the agent's key in the CLI
    agent: httpx.Client
    session_id: str
    workspace: Path
    keys: Iterator[int]

    def ask(self, command: str, file_sha256: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "session_id": self.session_id, "kind": "approval", "tool_name": "Bash",
            "tool_input": {"command": command}, "relay_key": f"k-{next(self.keys)}",
        }  # fmt: skip
        if file_sha256 is not None:
            body["rules_file_sha256"] = file_sha256
        r = self.agent.post("/api/v1/agent/permissions", json=body)
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out


@pytest.fixture
def world(shared_gateway: GatewayProcess, tmp_path: Path) -> Iterator[World]:
    url = shared_gateway.url
    n = next(_PEOPLE)
    ana_name, bob_name, agent_name = f"ana-r{n}", f"bob-r{n}", f"claude-r{n}"
    workspace = tmp_path / "shop"
    (workspace / ".agentmail").mkdir(parents=True)
    with httpx.Client(base_url=url, timeout=30) as http:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        token = http.post("/api/v1/auth/login", json=login).json()["token"]
        admin = {"Authorization": f"Bearer {token}"}
        clis = {}
        for name in (ana_name, bob_name):
            body = {"username": name, "password": USER_PASSWORD}
            assert http.post("/api/v1/admin/users", json=body, headers=admin).status_code == 201
            tok = http.post("/api/v1/auth/login", json=body).json()["token"]
            cli = Cli(url, tmp_path / f"xdg-{name}", {})
            save_login(url, name, tok, config_path({"XDG_CONFIG_HOME": str(cli.config_home)}))
            clis[name] = (cli, tok)
        created = {
            "name": agent_name, "owners": [ana_name], "taskers": [ana_name],
            "workspaces": [str(workspace)],
        }  # fmt: skip
        r = http.post("/api/v1/admin/agents", json=created, headers=admin)
        assert r.status_code == 201, r.text
        key = r.json()["key"]
        r = http.post(
            "/api/v1/mail",
            json={"to": [f"{agent_name}@{workspace}.new"], "subject": "s", "body": "b"},
            headers={"Authorization": f"Bearer {clis[ana_name][1]}"},
        )
        assert r.status_code == 201, r.text
        session_id = r.json()["session_id"]
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as ag:
        yield World(
            ana=clis[ana_name][0],
            bob=clis[bob_name][0],
            claude_cli=Cli(url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": key}),
            agent=ag,
            session_id=session_id,
            workspace=workspace,
            keys=count(1),
        )


def test_add_list_and_rm_a_session_rule_that_denies(world: World) -> None:
    made = world.ana.json(
        "rules", "add", "deny", "Bash", "git push", "--session", world.session_id,
        "--reason", "review first",
    )  # fmt: skip
    assert made["effect"] == "deny" and made["scope"] == "session"
    listed = world.ana.json("rules", "list")
    assert [r["id"] for r in listed if r["builtin"]][:1] == ["builtin-rm-rf"]
    assert made["id"] in [r["id"] for r in listed]
    assert made["id"] in world.ana.ok("rules", "list").stdout
    out = world.ask("git push origin x")
    assert out["status"] == "denied" and out["decided_by"] == f"rule:{made['id']}"
    # bob may not see or remove it.
    assert made["id"] not in [r["id"] for r in world.bob.json("rules", "list")]
    refused = world.bob("rules", "rm", made["id"])
    assert refused.returncode == 1 and "not found" in refused.stderr
    world.ana.ok("rules", "rm", made["id"])
    assert world.ask("git push origin x")["status"] == "pending"


def test_scope_is_required_once_and_global_is_for_admins(world: World) -> None:
    both = world.ana("rules", "add", "deny", "Bash", "--global", "--session", world.session_id)
    assert both.returncode == 1 and "exactly one of" in both.stderr
    glob = world.ana("rules", "add", "deny", "Bash", "--global")
    assert glob.returncode == 1 and "admins" in glob.stderr
    off = world.ana("rules", "disable", "builtin-rm-rf")
    assert off.returncode == 1 and "admins" in off.stderr


def test_an_agent_key_can_neither_add_nor_accept_rules(world: World) -> None:
    (world.workspace / ".agentmail" / "rules.toml").write_text(
        '[[rule]]\neffect = "allow"\ntool = "Bash"\n'
    )
    for args in (
        ("rules", "add", "allow", "Bash", "--session", world.session_id),
        ("rules", "accept", str(world.workspace), "--yes"),
        ("rules", "list"),
    ):
        result = world.claude_cli(*args)
        assert result.returncode == 1, args
        assert NOT_A_PERSON in result.stderr
    # And over HTTP, as an agent would try it without the CLI: 403, nothing written.
    content = (world.workspace / ".agentmail" / "rules.toml").read_text()
    body = {
        "workspace": str(world.workspace), "content": content,
        "sha256": hashlib.sha256(content.encode()).hexdigest(),
    }  # fmt: skip
    assert world.agent.post("/api/v1/rules/files", json=body).status_code == 403
    assert world.ask("anything", body["sha256"])["status"] == "pending"


def test_a_rule_file_counts_only_while_it_is_the_content_an_owner_accepted(
    world: World,
) -> None:
    path = world.workspace / ".agentmail" / "rules.toml"
    # The agent writes its own allow rule: ignored, nobody accepted it.
    path.write_text(
        '[[rule]]\neffect = "allow"\ntool = "Bash"\npattern = "make"\n\n'
        '[[rule]]\neffect = "deny"\ntool = "Bash"\npattern = "make deploy"\n'
        'reason = "deploys are manual"\n'
    )
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert world.ask("make test", sha)["status"] == "pending"
    # bob owns no agent rooted here: he may not accept it.
    refused = world.bob("rules", "accept", str(world.workspace), "--yes")
    assert refused.returncode == 1 and "owners" in refused.stderr
    shown = world.ana.ok("rules", "accept", str(world.workspace), "--yes").stdout
    assert sha in shown and "allow  Bash: make" in shown and "Accepted 2 rule(s)" in shown
    approved = world.ask("make test", sha)
    assert approved["status"] == "approved" and approved["decided_by"].startswith("rule:")
    # Without the hash (an older hook, or no file) its allow rules do not count.
    assert world.ask("make test")["status"] == "pending"
    # The agent changes the accepted file: ignored again until accepted again...
    path.write_text(path.read_text() + '\n[[rule]]\neffect = "allow"\ntool = "Bash"\n')
    changed = hashlib.sha256(path.read_bytes()).hexdigest()
    assert world.ask("make test", changed)["status"] == "pending"
    assert world.ask("rm -rf build", changed)["status"] == "pending"  # its new rule neither
    # ...but the accepted deny rule still holds: editing the file does not lift it.
    denied = world.ask("make deploy", changed)
    assert denied["status"] == "denied" and "deploys are manual" in denied["note"]
    # File rules change only through the file.
    listed = world.ana.json("rules", "list", "--workspace", str(world.workspace))
    assert {r["source"] for r in listed} == {"file"}
    gone = world.ana("rules", "rm", listed[0]["id"])
    assert gone.returncode == 1 and "accept it again" in gone.stderr


def test_a_bad_rule_file_is_refused_before_anything_is_sent(world: World) -> None:
    path = world.workspace / ".agentmail" / "rules.toml"
    path.write_text('[[rule]]\neffect = "allow"\ntool = "Bash"\ncolour = "red"\n')
    result = world.ana("rules", "accept", str(world.workspace), "--yes")
    assert result.returncode == 1 and "rule 1: unknown key 'colour'" in result.stderr
    path.write_text("[[rule]\n")
    result = world.ana("rules", "accept", str(world.workspace), "--yes")
    assert result.returncode == 1 and "not valid TOML" in result.stderr
