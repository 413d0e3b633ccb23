"""``agentmail work show | merge | discard | keep SESSION`` end to end: the real
``agentmail`` script against a real gateway (docs/review.md). The bridge's side
is plain HTTP with the agent's key: its event stream, its answers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.cli.test_cli_approvals import AGENTMAIL, Cli
from tests.conftest import ADMIN_PASSWORD, USER_PASSWORD
from tests.work_mail import REPORT

from mailui4agents import testing
from mailui4agents.cli.approvals import NOT_A_PERSON
from mailui4agents.cli.auth import save_login
from mailui4agents.client.config import config_path
from mailui4agents.testing import GatewayProcess

pytestmark = [pytest.mark.e2e]

_RUN = count(1)
WAIT_S = 30


@dataclass
class World:
    ana: Cli  # owns the session
    bob: Cli  # cc'd: reads it, owns nothing
    carl: Cli  # outside the session
    claude_cli: Cli
    agent: httpx.Client
    session_id: str
    alias: str
    claude_name: str


@pytest.fixture
def world(shared_gateway: GatewayProcess, tmp_path: Path) -> Iterator[World]:
    url = shared_gateway.url
    n = next(_RUN)
    names = {p: f"{p}-w{n}" for p in ("ana", "bob", "carl")}
    agent_name = f"claude-w{n}"
    ws = "/srv/work-cli"
    with httpx.Client(base_url=url, timeout=30) as http:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        admin = {
            "Authorization": f"Bearer {http.post('/api/v1/auth/login', json=login).json()['token']}"
        }
        clis, tokens = {}, {}
        for who, name in names.items():
            body = {"username": name, "password": USER_PASSWORD}
            assert http.post("/api/v1/admin/users", json=body, headers=admin).status_code == 201
            tokens[who] = http.post("/api/v1/auth/login", json=body).json()["token"]
            clis[who] = Cli(url, tmp_path / f"xdg-{name}", {})
            save_login(
                url, name, tokens[who],
                config_path({"XDG_CONFIG_HOME": str(clis[who].config_home)}),
            )  # fmt: skip
        created = {"name": agent_name, "owners": [names["ana"]], "workspaces": ["/srv/**"]}
        r = http.post("/api/v1/admin/agents", json=created, headers=admin)
        assert r.status_code == 201, r.text
        key = r.json()["key"]
        r = http.post(
            "/api/v1/mail",
            json={
                "to": [f"{agent_name}@{ws}.new"],
                "cc": [f"{names['bob']}@{ws}"],
                "subject": "Fix it",
                "body": "b",
                "worktree": True,
            },
            headers={"Authorization": f"Bearer {tokens['ana']}"},
        )
        assert r.status_code == 201, r.text
        session_id, alias = r.json()["session_id"], r.json()["session_alias"]
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as ag:
        put = ag.put(f"/api/v1/agent/sessions/{session_id}/work", json=REPORT)
        assert put.status_code == 200, put.text
        yield World(
            ana=clis["ana"], bob=clis["bob"], carl=clis["carl"],
            claude_cli=Cli(url, tmp_path / "xdg-claude", {"AGENTMAIL_KEY": key}),
            agent=ag, session_id=session_id, alias=alias, claude_name=agent_name,
        )  # fmt: skip


def pending(world: World) -> list[dict[str, Any]]:
    r = world.agent.get("/api/v1/agent/work/actions", params={"status": "pending"})
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def start(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*AGENTMAIL, *args],
        env=testing.clean_env(XDG_CONFIG_HOME=str(cli.config_home), AGENTMAIL_URL=cli.url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def merge_answered(
    world: World, session: str, answer: dict[str, Any], command: str = "merge"
) -> subprocess.CompletedProcess[str]:
    """`agentmail work merge SESSION` while the test plays the bridge: connected
    to the agent's stream first (nothing can be missed from then on), it answers
    the `work_action` event the command's request sends."""
    with world.agent.stream("GET", "/api/v1/agent/events", timeout=WAIT_S) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith(":")
        run = start(world.ana, "work", command, session)
        seen_event = False
        for line in lines:
            if line == "event: work_action":
                seen_event = True
            elif seen_event and line.startswith("data: "):
                action = json.loads(line[len("data: ") :])
                r = world.agent.post(f"/api/v1/agent/work/actions/{action['id']}", json=answer)
                assert r.status_code == 200, r.text
                break
    out, err = run.communicate(timeout=WAIT_S)
    assert "Traceback" not in err
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def test_show_by_alias_and_by_id(world: World) -> None:
    text = world.ana.ok("work", "show", world.alias).stdout
    assert "Branch:  agentmail/fix (from main)" in text
    assert "Path:    /srv/state/worktrees/abc/fix" in text
    assert "Size:    12.1 KiB" in text
    assert "uncommitted changes, 2 commit(s) not merged" in text
    by_id = world.bob.json("work", "show", world.session_id)
    assert by_id["worktree"] is True and by_id["work"]["branch"] == "agentmail/fix"
    refused = world.carl("work", "show", world.session_id)
    assert refused.returncode == 1 and "not found" in refused.stderr
    unknown = world.carl("work", "show", world.alias)
    assert (
        unknown.returncode == 1
        and f"no session you may read is named '{world.alias}'" in unknown.stderr
    )


def test_merge_waits_for_the_bridge_and_a_refusal_exits_1(world: World) -> None:
    answer = {"status": "refused", "message": "conflicts with main", "conflicts": ["app.py"]}
    done = merge_answered(world, world.alias, answer)
    assert done.returncode == 1, done.stderr
    assert "merge refused: conflicts with main" in done.stdout
    assert "conflict: app.py" in done.stdout


def test_merge_done_exits_0(world: World) -> None:
    done = merge_answered(world, world.session_id, {"status": "done", "message": "ff to bbbbbbb"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "merge done: ff to bbbbbbb"


def test_merge_no_wait_returns_at_once(world: World) -> None:
    out = world.ana.ok("work", "merge", world.alias, "--no-wait").stdout
    assert out.startswith("Asked: merge (")
    assert [a["action"] for a in pending(world)] == ["merge"]
    again = world.ana("work", "keep", world.alias)
    assert again.returncode == 1 and "still pending" in again.stderr


def test_push_needs_a_remote_then_waits_and_prints_the_command(world: World) -> None:
    # REPORT has no remote: nothing is asked, the reason is said.
    refused = world.ana("work", "push", world.alias)
    assert refused.returncode == 1 and "no git remote" in refused.stderr
    assert pending(world) == []
    put = world.agent.put(
        f"/api/v1/agent/sessions/{world.session_id}/work", json={**REPORT, "remote": "origin"}
    )
    assert put.status_code == 200, put.text
    assert "Remote:  origin" in world.ana.ok("work", "show", world.alias).stdout
    said = "Pushed agentmail/fix to origin.\ngh pr create --base main --head agentmail/fix"
    done = merge_answered(world, world.alias, {"status": "done", "message": said}, "push")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"push done: {said}"
    failed = merge_answered(
        world, world.alias, {"status": "failed", "message": "git push: denied"}, "push"
    )
    assert failed.returncode == 1 and "push failed: git push: denied" in failed.stdout
    bob = world.bob("work", "push", world.alias)
    assert bob.returncode == 1 and "only the session's owners" in bob.stderr


def test_discard_needs_yes(world: World) -> None:
    refused = world.ana("work", "discard", world.alias)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert pending(world) == []
    made = world.ana.json("work", "discard", world.alias, "--yes")
    assert (made["action"], made["status"]) == ("discard", "pending")
    assert [a["id"] for a in pending(world)] == [made["id"]]


def test_only_owners_keep_and_agents_are_refused(world: World) -> None:
    bob = world.bob("work", "keep", world.alias)
    assert bob.returncode == 1 and "only the session's owners" in bob.stderr
    agent = world.claude_cli("work", "show", world.session_id)
    assert agent.returncode == 1 and NOT_A_PERSON in agent.stderr
    assert pending(world) == []
    world.ana.ok("work", "keep", world.alias)
    assert [a["action"] for a in pending(world)] == ["keep"]


def test_send_worktree_asks_for_an_own_worktree(world: World) -> None:
    sent = world.ana.json(
        "send", "--to", f"{world.claude_name}@/srv/work-cli.new", "--subject", "own",
        "--body", "b", "--worktree",
    )  # fmt: skip
    assert sent["worktree"] is True
    plain = world.ana.json(
        "send", "--to", f"{world.claude_name}@/srv/work-cli.new", "--subject", "p", "--body", "b"
    )
    assert plain["worktree"] is False
