"""The bridge's own workspace roots, whatever the gateway allowed (issue 22, item 2):
real gateway, real `agentmail bridge --runner command`, the fake agent CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailui4agents.bridge.workspace_roots import WorkspaceRoots, resolved_root
from mailui4agents.cli.bridge import bridge as bridge_command
from mailui4agents.domain.roots import RootError
from tests.bridge.harness import Agent, Human


async def refused(human: Human, agent: Agent, workspace: Path | str) -> str:
    """Mail the agent in `workspace`; the failure mail's body (and nothing ran)."""
    sent = await human.send(
        f"{agent.name}@{workspace}.new", "!bash echo ran > ran.txt", mode="full"
    )
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "failure", reply
    assert "outside the folders the bridge lets this agent work in" in reply["body"]
    # The failure mail settles the mail: no attempt of it can start any more.
    await agent.wait_ledger(f'"mail_id":"{sent["id"]}","state":"completed"')
    assert agent.starts(sent["id"]) == []
    return str(reply["body"])


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_turn_outside_the_bridges_roots_is_refused_and_runs_nothing(
    human: Human, agent: Agent
) -> None:
    tmp = agent.workspace.parent
    shop, home_x = tmp / "srv" / "shop", tmp / "home" / "x"
    shop.mkdir(parents=True)
    home_x.mkdir(parents=True)
    (tmp / "srv" / "link").symlink_to(home_x)
    agent.bridge("--workspace-root", f"{tmp}/srv/*")

    body = await refused(human, agent, home_x)
    assert f"workspace {home_x} is outside this bridge's workspace roots: {tmp}/srv/*" in body
    # A symlink inside the root is judged by where it points.
    body = await refused(human, agent, tmp / "srv" / "link")
    assert f"{tmp}/srv/link (resolved: {home_x}) is outside" in body
    # `*` is one component: neither the root's own folder nor deeper ones.
    await refused(human, agent, tmp / "srv")
    (shop / "web").mkdir()
    await refused(human, agent, shop / "web")
    assert not (home_x / "ran.txt").exists()

    sent = await human.send(f"{agent.name}@{shop}.new", "!bash echo ran > ran.txt", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "relay" and "ran [echo ran > ran.txt]" in reply["body"]
    assert agent.starts(sent["id"])[0]["cwd"] == str(shop)
    assert (shop / "ran.txt").read_text() == "ran\n"


@pytest.mark.anyio
@pytest.mark.e2e
async def test_the_default_root_is_the_bridge_users_home(human: Human, agent: Agent) -> None:
    tmp = agent.workspace.parent
    home = tmp / "home"
    (home / "x").mkdir(parents=True)
    bridge = agent.bridge(default_roots=True, HOME=str(home))
    assert f"workspace roots: {home}/**" in bridge.log
    body = await refused(human, agent, agent.workspace)
    assert f"workspace roots: {home}/**" in body
    # Outside every root, a missing folder is refused as outside: the failure
    # mail tells nothing of what exists on the machine.
    body = await refused(human, agent, "/nowhere/on/this/machine")
    assert "does not exist" not in body
    sent = await human.send(f"{agent.name}@{home / 'x'}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "relay" and "DONE" in reply["body"]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_an_explicit_everywhere_root_starts_with_a_warning(
    human: Human, agent: Agent
) -> None:
    bridge = agent.bridge("--workspace-root", "/**")
    assert "workspace root /** reaches into every top-level folder" in bridge.log
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", "hello", mode="full")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert reply["type"] == "relay"


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--workspace-root", "/"], {}, "'/' names the root folder only"),
        (["--workspace-root", "srv/*"], {}, "must be an absolute path"),
        (["--workspace-root", "/srv/.."], {}, "'/' names the root folder only"),  # is /
        ([], {"HOME": "/"}, "home is '/'"),
    ],
)
def test_unusable_roots_stop_the_bridge_before_it_starts(
    args: list[str], env: dict[str, str], said: str
) -> None:
    result = CliRunner().invoke(
        bridge_command, ["--agent", "a", "--runner", "command", *args, "--", "true"], env=env
    )
    assert result.exit_code == 1
    assert said in result.output


def test_roots_are_matched_on_resolved_paths(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "shop").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(real)
    # A root written through a symlink still covers the folders it names.
    roots = WorkspaceRoots.from_options([f"{tmp_path}/alias/*"])
    assert resolved_root(f"{tmp_path}/alias/*") == f"{real}/*"
    assert roots.check(f"{tmp_path}/alias/shop") == (f"{real}/shop", True)
    assert roots.check(str(real / "shop")) == (f"{real}/shop", True)
    assert roots.check(str(real)) == (str(real), False)
    assert WorkspaceRoots.from_options(["/**"]).broad() == ["/**"]
    assert WorkspaceRoots.from_options(["/srv/*"]).broad() == []
    assert WorkspaceRoots.from_options([], home=str(tmp_path)).roots == (f"{tmp_path}/**",)
    with pytest.raises(RootError):
        WorkspaceRoots.from_options([], home="relative")
