"""The turn sandbox end to end (docs/sandbox.md): real gateway, real bridge, real
bubblewrap and Landlock, the fake agent CLI as the command runner (no model).

The fake agent's ``!write PATH`` writes without asking anyone (a tool that does
not call the hook), so only the kernel stands between it and the path; its
``!bash CMD`` asks through ``agentmail hook generic`` first. What each write
met comes back in the reply (``write PATH: EROFS``), so the turn went on.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mailui4agents.bridge.sandbox import LAUNCHER
from tests import needs
from tests.bridge.harness import Agent, BridgeProcess, Human

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REFUSED = re.compile(r": (EROFS|EACCES)\b")


@pytest.fixture(autouse=True)
def bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        needs.missing(
            "bubblewrap missing: scripts/install-test-deps.sh (apt-get install bubblewrap)"
        )
    return str(found)


@pytest.fixture
def outside(agent: Agent) -> Path:
    """A folder outside the workspace, the state dir and the agent's own files."""
    folder = agent.workspace.parent / "outside"
    folder.mkdir()
    return folder


def start(agent: Agent, *args: str, **env_vars: str) -> BridgeProcess:
    """A sandboxed bridge; the fake agent's own log and state stay writable."""
    agent.log_path.touch()
    agent.fake_state.mkdir(exist_ok=True)
    return agent.bridge(
        "--sandbox-write", str(agent.log_path), "--sandbox-write", str(agent.fake_state),
        *args, sandbox=True, env=env_vars,
    )  # fmt: skip


def line(reply: dict[str, object], what: str) -> str:
    """The part of the fake agent's answer about ``what`` (``write PATH: …``)."""
    body = str(reply["body"])
    for part in body.split("; "):
        if what in part:
            return part
    raise AssertionError(f"{what!r} not in the answer: {body}")


async def heartbeat_sandbox(human: Human, name: str) -> tuple[dict[str, object] | None, str]:
    admin = {"Authorization": f"Bearer {human.admin_token}"}
    r = await human.http.get("/api/v1/admin/agents", headers=admin)
    assert r.status_code == 200, r.text
    found = next(a for a in r.json()["items"] if a["name"] == name)
    return found.get("sandbox"), str(found.get("mode_enforcement"))


async def wait_sandbox_state(human: Human, name: str, state: str) -> tuple[dict[str, object], str]:
    """Poll the agent as the admin sees it (no event for "a heartbeat arrived")
    until its sandbox report is in ``state``: the bridge sends a heartbeat on a
    change, at most one a second."""
    with anyio.fail_after(15):
        while True:
            sandbox, enforcement = await heartbeat_sandbox(human, name)
            if isinstance(sandbox, dict) and sandbox.get("state") == state:
                return sandbox, enforcement
            await anyio.sleep(0.1)


async def test_workspace_writes_inside_without_asking_and_the_kernel_refuses_outside(
    human: Human, agent: Agent, outside: Path
) -> None:
    start(agent)
    settings = agent.workspace / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}")
    body = "\n".join([
        "!bash echo in > inside.txt",
        f"!bash {{ echo out > {outside}/bash.txt; }} 2> bash-error.txt",
        f"!write {outside}/direct.txt",
        f"!write {agent.workspace}/direct.txt",
        f"!write {settings}",
    ])  # fmt: skip
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="workspace")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    # Inside: written, and nobody was asked (the proven sandbox allowed it).
    assert (agent.workspace / "inside.txt").read_text() == "in\n"
    assert line(reply, "ran [echo in")
    assert await human.all_permissions(sent["session_id"]) == []
    assert line(reply, f"wrote {agent.workspace}/direct.txt")
    # Outside: the guarded call ran unasked too, and the kernel refused its write.
    assert not (outside / "bash.txt").exists()
    error = (agent.workspace / "bash-error.txt").read_text()
    assert "Read-only file system" in error or "Permission denied" in error, error
    assert REFUSED.search(line(reply, f"write {outside}/direct.txt"))
    assert not (outside / "direct.txt").exists()
    # A protected path inside the workspace stays read-only.
    assert REFUSED.search(line(reply, f"write {settings}"))
    assert settings.read_text() == "{}"
    assert await heartbeat_sandbox(human, agent.name) == ({"state": "proven", "reason": None},
                                                          "native")  # fmt: skip
    prompt = agent.starts(sent["id"])[0]["prompt"]
    assert "Enforcement: native" in prompt and "inside the workspace run without asking" in prompt


async def test_a_workspace_around_the_bridges_state_keeps_the_state_read_only(
    human: Human, agent: Agent
) -> None:
    around = agent.workspace.parent  # holds the workspace, the state dir, the agent's log
    start(agent)
    body = f"!write {around}/note.txt\n!write {agent.state_dir}/ledger.jsonl\n!bash echo x > b.txt"
    sent = await human.send(f"{agent.name}@{around}.new", body, mode="workspace")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert line(reply, f"wrote {around}/note.txt")
    assert REFUSED.search(line(reply, f"write {agent.state_dir}/ledger.jsonl")), reply["body"]
    assert "written by the agent" not in (agent.state_dir / "ledger.jsonl").read_text()
    assert line(reply, "ran [echo x")  # proven: asked nobody
    assert await human.all_permissions(sent["session_id"]) == []


async def test_plan_refuses_every_write_and_full_writes_outside_but_not_protected(
    human: Human, agent: Agent, outside: Path, tmp_path: Path
) -> None:
    data = tmp_path / "gateway-data"  # protected (AGENTMAIL_DATA_DIR), as the gateway's own
    data.mkdir()
    start(agent, AGENTMAIL_DATA_DIR=str(data))
    body = "\n".join([
        f"!write {outside}/o.txt",
        f"!write {agent.workspace}/w.txt",
        f"!write {data}/d.txt",
        "!bash echo hi > marker.txt",
    ])  # fmt: skip
    plan = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="plan")
    reply = await human.wait_reply(plan["session_id"], plan["id"])
    for path in (outside / "o.txt", agent.workspace / "w.txt", data / "d.txt"):
        assert REFUSED.search(line(reply, f"write {path}")), reply["body"]
        assert not path.exists()
    assert line(reply, "denied [echo hi")  # plan: the gateway refuses, as without a sandbox

    full = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="full")
    reply = await human.wait_reply(full["session_id"], full["id"])
    assert line(reply, f"wrote {outside}/o.txt")
    assert line(reply, f"wrote {agent.workspace}/w.txt")
    assert (outside / "o.txt").exists() and (agent.workspace / "w.txt").exists()
    assert REFUSED.search(line(reply, f"write {data}/d.txt")), reply["body"]
    assert not (data / "d.txt").exists()
    assert (agent.workspace / "marker.txt").exists()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that is neither the gateway's nor a model's."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


async def test_network_deny_refuses_a_loopback_port_and_a_listed_port_connects(
    human: Human, agent: Agent, listener: int
) -> None:
    body = f"!connect {listener}\n!bash echo hi > marker.txt"
    start(agent, "--sandbox-network", "deny")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="workspace")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert line(reply, f"connect {listener}: EACCES")
    # The gateway stays reachable: the hook asked it (allowed by the sandbox).
    assert line(reply, "ran [echo hi")
    agent.bridges[-1].kill()

    start(agent, "--sandbox-network", f"{listener}")
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="workspace")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert line(reply, f"connect {listener}: ok")


async def test_plan_denies_the_network_by_default_and_workspace_allows_it(
    human: Human, agent: Agent, listener: int
) -> None:
    start(agent)
    plan = await human.send(
        f"{agent.name}@{agent.workspace}.new", f"!connect {listener}", mode="plan"
    )
    reply = await human.wait_reply(plan["session_id"], plan["id"])
    assert line(reply, f"connect {listener}: EACCES")
    work = await human.send(
        f"{agent.name}@{agent.workspace}.new", f"!connect {listener}", mode="workspace"
    )
    reply = await human.wait_reply(work["session_id"], work["id"])
    assert line(reply, f"connect {listener}: ok")


# -- fail closed --------------------------------------------------------------------------


async def test_without_bwrap_on_path_every_guarded_call_asks_and_the_heartbeat_says_why(
    human: Human, agent: Agent, outside: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bin-without-bwrap"
    bare.mkdir()
    start(agent, PATH=str(bare))
    body = f"!bash echo hi > marker.txt\n!write {outside}/direct.txt"
    sent = await human.send(f"{agent.name}@{agent.workspace}.new", body, mode="workspace")
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash"
    sandbox, enforcement = await heartbeat_sandbox(human, agent.name)
    assert sandbox == {"state": "unavailable",
                       "reason": "sandbox unavailable: bwrap not installed "
                                 "(Debian package bubblewrap)"}  # fmt: skip
    assert enforcement == "advisory"  # the command runner's own level
    await human.decide(request["id"], "approve")
    reply = await human.wait_reply(sent["session_id"], sent["id"])
    assert line(reply, f"wrote {outside}/direct.txt")  # unconfined, as said
    assert "sandbox unavailable: bwrap not installed" in agent.bridges[-1].log


async def test_a_sandbox_that_lets_the_canary_through_is_not_trusted(
    human: Human, agent: Agent, tmp_path: Path, bwrap: str
) -> None:
    """A test double for bwrap: it runs the command it is given without any
    confinement and writes the canaries itself, so the outside one succeeds."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    script = fake / "bwrap"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "rest = args[args.index('--') + 1:]\n"
        "if '--probe' in rest:\n"
        "    def write(p):\n"
        "        try:\n"
        "            open(p, 'x').close(); os.unlink(p); return 'ok'\n"
        "        except OSError as e:\n"
        "            return 'EACCES'\n"
        "    for i, a in enumerate(rest):\n"
        "        if a in ('--probe-deny', '--probe-allow'):\n"
        "            print(a[8:], write(rest[i + 1]), rest[i + 1], sep='\\t')\n"
        "    sys.exit(0)\n"
        "cmd = rest[rest.index('--') + 1:]\n"
        "os.execvp(cmd[0], cmd)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    start(agent, PATH=f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash"
    sandbox, enforcement = await heartbeat_sandbox(human, agent.name)
    assert isinstance(sandbox, dict) and sandbox["state"] == "unavailable"
    assert "canary write outside the boundary" in str(sandbox["reason"])
    assert enforcement == "advisory"
    await human.decide(request["id"], "deny", note="no")
    await human.wait_reply(sent["session_id"], sent["id"])
    assert not (agent.workspace / "marker.txt").exists()


# -- the turn's own launcher ---------------------------------------------------------------


def launcher(tmp_path: Path, *options: str) -> dict[str, str]:
    """Run the launcher (no bwrap: Landlock alone) with a turn's canaries; the
    environment the CLI got, and the report."""
    report = tmp_path / "inside" / "proof"  # the turn's folder: writable
    argv = [sys.executable, "-I", "-S", str(LAUNCHER), *options, "--report", str(report),
            "--proven-env", "AGENTMAIL_SANDBOX", "--", "env"]  # fmt: skip
    env = {"PATH": os.environ.get("PATH", ""), "AGENTMAIL_SANDBOX": "proven"}  # a forged flag
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=True)
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {"flag": seen.get("AGENTMAIL_SANDBOX", ""), "report": report.read_text()}


def test_the_launcher_hands_the_flag_on_only_when_its_canaries_hold(tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    canaries = ["--probe-deny", str(outside / "c"), "--probe-allow", str(inside / "c")]
    held = launcher(tmp_path, "--write", str(inside), "--net-all", *canaries)
    assert held["flag"] == "proven"
    assert f"deny\tEACCES\t{outside / 'c'}" in held["report"]
    # Landlock leaves writes alone (as a broken sandbox would): the outside canary
    # gets through, so the flag — even one forged in the environment — is removed.
    through = launcher(tmp_path, "--write-all", "--net-all", *canaries)
    assert through["flag"] == ""
    assert f"deny\tok\t{outside / 'c'}" in through["report"]
    assert not (outside / "c").exists()


async def test_a_turn_whose_own_canary_gets_through_asks_and_reports_it(
    human: Human, agent: Agent, tmp_path: Path, bwrap: str
) -> None:
    """Proven at start (the probe goes to the real bwrap), then a turn's sandbox
    made porous by a test double: / mounted writable and Landlock told to leave
    writes alone. The turn's launcher finds its outside canary written, so the
    CLI gets no AGENTMAIL_SANDBOX, its guarded call is asked, and the heartbeat
    says why."""
    fake = tmp_path / "porous-bin"
    fake.mkdir()
    script = fake / "bwrap"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "if '--probe' not in args:\n"
        "    cut = args.index('--')\n"
        "    mounts = ['--bind' if a == '--ro-bind' else a for a in args[:cut]]\n"
        "    rest, out, i = args[cut:], [], 0\n"
        "    while i < len(rest):\n"
        "        if rest[i] == '--write':\n"
        "            i += 2\n"
        "            continue\n"
        "        out.append(rest[i])\n"
        "        i += 1\n"
        "    at = out.index('--', 1)\n"
        "    args = mounts + out[:at] + ['--write-all'] + out[at:]\n"
        f"os.execv({bwrap!r}, [{bwrap!r}, *args])\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    start(agent, PATH=f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    sandbox, enforcement = await heartbeat_sandbox(human, agent.name)
    assert sandbox == {"state": "proven", "reason": None} and enforcement == "native"
    sent = await human.send(
        f"{agent.name}@{agent.workspace}.new", "!bash echo hi > marker.txt", mode="workspace"
    )
    request = await human.wait_pending(sent["session_id"])
    assert request["tool_name"] == "Bash"
    await human.decide(request["id"], "deny", note="no")
    await human.wait_reply(sent["session_id"], sent["id"])
    sandbox, enforcement = await wait_sandbox_state(human, agent.name, "unavailable")
    assert "canary write outside the boundary" in str(sandbox["reason"]), sandbox
    assert enforcement == "advisory"
