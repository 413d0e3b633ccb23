"""The sandbox's pure parts (bridge/sandbox.py, docs/sandbox.md): the network
setting, the boundary of each mode, the canaries and how a report is judged.
No process is started here (the fast tier); tests/bridge/test_sandbox_e2e.py runs
the real thing."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailui4agents.bridge.sandbox import Network, Sandbox, judge_report, network_for, url_port
from mailui4agents.cli.bridge import bridge


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("allow", Network("allow")),
        ("deny", Network("deny")),
        ("8080", Network("list", (8080,))),
        (" 8080, 443,8080 ", Network("list", (443, 8080))),
    ],
)
def test_the_network_setting_reads_allow_deny_or_ports(value: str, want: Network) -> None:
    assert Network.parse(value) == want


@pytest.mark.parametrize("value", ["", "ALLOW", "0", "65536", "80,x", "-1", "1.5"])
def test_anything_else_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        Network.parse(value)


def test_too_many_ports_are_refused() -> None:
    with pytest.raises(ValueError, match="between 1 and 64"):
        Network.parse(",".join(str(p) for p in range(1000, 1065)))


def test_the_default_network_denies_in_plan_and_allows_elsewhere() -> None:
    assert network_for("plan", None) == Network("deny")
    assert network_for("workspace", None) == Network("allow")
    assert network_for("full", None) == Network("allow")
    assert network_for("plan", Network("allow")) == Network("allow")


def test_url_ports() -> None:
    assert url_port("http://127.0.0.1:8123/v1") == 8123
    assert url_port("https://api.example.com") == 443
    assert url_port("http://x") == 80
    assert url_port("ftp://x") is None
    assert url_port("http://[::1") is None


def box_for(tmp_path: Path, mode: str, network: Network | None = None, **env: str):  # type: ignore[no-untyped-def]
    workspace, turn_dir = tmp_path / "work", tmp_path / "state" / "turns" / "t"
    for folder in (workspace, turn_dir):
        folder.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(network=network)
    full_env = {"HOME": str(tmp_path / "home"), "AGENTMAIL_URL": "http://127.0.0.1:7001", **env}
    return sandbox, sandbox.box(mode, workspace, turn_dir, [], full_env, [9001])  # type: ignore[arg-type]


def test_each_mode_writes_where_the_table_says(tmp_path: Path) -> None:
    _, plan = box_for(tmp_path, "plan")
    _, work = box_for(tmp_path, "workspace")
    _, full = box_for(tmp_path, "full")
    turn = str((tmp_path / "state" / "turns" / "t").resolve())
    assert str((tmp_path / "work").resolve()) not in plan.writable and turn in plan.writable
    assert work.writable[0] == str((tmp_path / "work").resolve()) and turn in work.writable
    assert full.write_all and not plan.write_all and not work.write_all


def test_deny_lets_the_gateway_the_model_and_listed_ports_through(tmp_path: Path) -> None:
    _, plan = box_for(tmp_path, "plan", ANTHROPIC_BASE_URL="http://127.0.0.1:7002")
    assert plan.ports == (443, 7001, 7002, 9001)
    _, listed = box_for(tmp_path, "workspace", Network.parse("5432"))
    assert listed.ports == (443, 5432, 7001, 9001)
    _, allowed = box_for(tmp_path, "plan", Network("allow"))
    assert allowed.ports is None


def test_protected_paths_and_the_state_dir_are_mounted_read_only_after_the_writable_ones(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "work" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{}")
    sandbox, box = box_for(tmp_path, "workspace")
    argv = sandbox.bwrap_argv(box)
    pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i].startswith("--")]
    work = str((tmp_path / "work").resolve())
    state = str((tmp_path / "state").resolve())
    assert pairs.index(("--bind", work)) < pairs.index(("--ro-bind", str(settings)))
    turn = ("--bind", str(Path(state) / "turns" / "t"))
    last_turn_bind = len(pairs) - 1 - pairs[::-1].index(turn)
    assert pairs.index(("--ro-bind", state)) < last_turn_bind  # bound writable again on top
    _, full = box_for(tmp_path, "full")
    assert str(settings) in full.read_only


def test_the_canaries_of_each_mode(tmp_path: Path) -> None:
    for mode, workspace_side in (("plan", "deny"), ("workspace", "allow"), ("full", "allow")):
        sandbox, box = box_for(tmp_path, mode)
        deny, allow = sandbox.canaries(box)
        state = str((tmp_path / "state").resolve())
        assert any(p.startswith(state + "/canary/") for p in deny), mode
        assert any(p.startswith(str(box.tmp_dir)) for p in allow), mode
        side = deny if workspace_side == "deny" else allow
        assert any(p.startswith(str(box.workspace) + "/") for p in side), mode


def test_a_report_proves_only_when_every_canary_answered_right() -> None:
    deny, allow = ["/o/a", "/o/b"], ["/i/c"]
    good = "deny\tEROFS\t/o/a\ndeny\tEACCES\t/o/b\nallow\tok\t/i/c\n"
    assert judge_report(good, deny, allow).ok
    through = good.replace("EACCES", "ok")
    proof = judge_report(through, deny, allow)
    assert not proof.ok and "/o/b was not refused (ok)" in str(proof.reason)
    assert not judge_report(good.replace("allow\tok", "allow\tEROFS"), deny, allow).ok
    assert not judge_report("deny\tEROFS\t/o/a\n", deny, allow).ok  # a canary missing
    assert not judge_report("garbage", deny, allow).ok
    assert not judge_report(good.replace("EROFS", "ENOENT"), deny, allow).ok


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--sandbox-network", "sometimes"], "--sandbox-network"),
        (["--sandbox-write", "relative/path"], "--sandbox-write"),
    ],
)
def test_bad_sandbox_options_name_the_option(args: list[str], said: str) -> None:
    result = CliRunner().invoke(bridge, ["--agent", "a", "--runner", "claude-code", *args])
    assert result.exit_code == 2
    assert said in result.output
