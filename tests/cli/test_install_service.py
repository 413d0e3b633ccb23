"""`agentmail install-service` writes units that `systemd-analyze verify` accepts
(hardened, ReadWritePaths= only what the service writes), and `agentmail
service-failed` (their OnFailure= unit) mails the admin through a real gateway,
or says on stderr why it could not (docs/service.md). Nothing is enabled or started."""

from __future__ import annotations

import configparser
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests import needs
from tests.conftest import ADMIN_PASSWORD, Api

from mailui4agents.testing import FAST_HASH_ENV, GatewayProcess, clean_env

pytestmark = [pytest.mark.e2e]

AGENTMAIL = Path(sys.executable).parent / "agentmail"  # this venv's console script


def agentmail(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailui4agents.cli.main", *map(str, args)],
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def verify(units: list[Path], *, user: bool, runtime: Path) -> subprocess.CompletedProcess[str]:
    cmd = [needs.systemd_analyze(), *(["--user"] if user else []), "verify", *map(str, units)]
    # A user manager needs a runtime dir; a private one, never the machine's.
    env = clean_env(XDG_RUNTIME_DIR=str(runtime), SYSTEMD_LOG_LEVEL="notice")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)


def section(path: Path, name: str) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path)
    return dict(parser[name])


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    return d


@pytest.mark.parametrize("user", [False, True], ids=["system", "user"])
def test_the_gateway_unit_is_hardened_and_verifies(
    tmp_path: Path, runtime: Path, user: bool
) -> None:
    if not AGENTMAIL.exists():
        needs.missing(f"{AGENTMAIL} missing: make .venv/.installed-stamp")
    data = tmp_path / "data"
    data.mkdir()  # ReadWritePaths= must exist when the unit starts
    units = tmp_path / "units"
    args: list[str | Path] = ["install-service", "gateway", "--unit-dir", units, "--data-dir", data]
    args += ["--agentmail", AGENTMAIL, "--port", "8099", *(["--user"] if user else [])]
    done = agentmail(*args, "--", "--log-level", "warning")
    assert done.returncode == 0, done.stderr
    gateway, failed = units / "agentmail-gateway.service", units / "agentmail-failed@.service"
    checked = verify([gateway, failed], user=user, runtime=runtime)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr

    service = section(gateway, "Service")
    assert service["ExecStart"] == (
        f"{AGENTMAIL} serve --data-dir {data} --host 127.0.0.1 --port 8099 --log-level warning"
    )
    assert service["ReadWritePaths"] == str(data)  # the data dir only
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "Restart": "on-failure",
        "UMask": "0077",
    }.items():
        assert service[key] == value, key
    assert ("User" in service) is not user and ("CapabilityBoundingSet" in service) is not user
    assert section(gateway, "Unit")["OnFailure"] == "agentmail-failed@%n.service"
    notice = section(failed, "Service")
    assert notice["ExecStart"] == f"{AGENTMAIL} service-failed {'--user ' if user else ''}%i"
    assert notice["NoNewPrivileges"] == "yes"

    # The check can fail: a misspelt hardening key is reported (and ignored by systemd).
    broken = tmp_path / "broken" / "agentmail-gateway.service"
    broken.parent.mkdir()
    broken.write_text(gateway.read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    checked = verify([broken], user=user, runtime=runtime)
    assert "Unknown key 'NoNewPrivilege'" in checked.stderr

    # Written once; a second run does not overwrite without --force.
    again = agentmail(*args)
    assert again.returncode == 1 and "exists" in again.stderr


def test_the_bridge_unit_writes_only_its_state_and_workspaces(
    tmp_path: Path, runtime: Path
) -> None:
    if not AGENTMAIL.exists():
        needs.missing(f"{AGENTMAIL} missing: make .venv/.installed-stamp")
    state, ws, claude = tmp_path / "state", tmp_path / "ws", tmp_path / "dot-claude"
    for d in (state, ws, claude):
        d.mkdir()
    units = tmp_path / "units"
    done = agentmail(
        "install-service", "bridge", "--unit-dir", units, "--state-dir", state,
        "--workspace-root", ws, "--writable", claude, "--agentmail", AGENTMAIL,
        "--", "--agent", "claude", "--runner", "claude-code",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bridge = units / "agentmail-bridge.service"
    checked = verify([bridge, units / "agentmail-failed@.service"], user=False, runtime=runtime)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    service = section(bridge, "Service")
    assert service["ReadWritePaths"] == f"{state} {ws} {claude}"
    assert service["ExecStart"] == (
        f"{AGENTMAIL} bridge --state-dir {state} --workspace-root {ws} "
        "--agent claude --runner claude-code"
    )


def test_refusals_name_the_option(tmp_path: Path) -> None:
    done = agentmail("install-service", "bridge", "--unit-dir", tmp_path, "--agentmail", AGENTMAIL)
    assert done.returncode == 2 and "--workspace-root" in done.stderr
    done = agentmail(
        "install-service", "gateway", "--unit-dir", tmp_path, "--data-dir", "relative/dir",
        "--agentmail", AGENTMAIL,
    )  # fmt: skip
    assert done.returncode == 2 and "--data-dir" in done.stderr
    done = agentmail(
        "install-service", "gateway", "--unit-dir", tmp_path, "--data-dir", tmp_path / "a b",
        "--agentmail", AGENTMAIL,
    )  # fmt: skip
    assert done.returncode == 2 and "spaces" in done.stderr
    assert list(tmp_path.iterdir()) == []
    # No sender's credential: the notice cannot go out, and it says so with the report.
    env = clean_env(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path), **fake_journalctl(tmp_path))
    done = agentmail("service-failed", "agentmail-bridge.service", env=env)
    assert done.returncode == 1 and "no AGENTMAIL_KEY or AGENTMAIL_TOKEN" in done.stderr
    assert "Traceback: the disk is full" in done.stderr


def fake_journalctl(tmp_path: Path) -> dict[str, str]:
    """PATH with a `journalctl` that prints known lines (the machine's journal is
    outside the test: there is no systemd running here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "journalctl"
    script.write_text(
        "#!/bin/sh\necho \"journalctl $*\"\necho 'agentmail[42]: Traceback: the disk is full'\n"
    )
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.anyio
async def test_service_failed_mails_the_admin_through_the_gateway(tmp_path: Path) -> None:
    gw = GatewayProcess(
        data_dir=tmp_path / "data",
        env=clean_env(AGENTMAIL_ADMIN_PASSWORD=ADMIN_PASSWORD, **FAST_HASH_ENV),
    )
    gw.start()
    journal = fake_journalctl(tmp_path)
    try:
        a = Api(httpx.AsyncClient(base_url=gw.url, timeout=30))
        await a.login("admin", ADMIN_PASSWORD)
        key = await a.agent("ops")
        env = clean_env(AGENTMAIL_URL=gw.url, AGENTMAIL_KEY=key, **journal)
        env["HOME"] = str(tmp_path)  # no stored login of the machine's user
        done = agentmail("service-failed", "agentmail-bridge.service", "--lines", "7", env=env)
        assert done.returncode == 0, done.stderr
        r = await a.http.get("/api/v1/mailbox", params={"status": "all"}, headers=a.auth("admin"))
        [item] = [m for m in r.json()["items"] if "agentmail-bridge.service" in m["subject"]]
        assert item["subject"] == f"agentmail-bridge.service failed on {socket.gethostname()}"
        mail = (await a.http.get(f"/api/v1/mail/{item['id']}", headers=a.auth("admin"))).json()
        assert "journalctl --unit agentmail-bridge.service -n 7" in mail["body"]
        assert "Traceback: the disk is full" in mail["body"]
        await a.http.aclose()
    finally:
        gw.stop()

    # The gateway itself is down: nobody can be mailed; the report goes to the journal.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = clean_env(AGENTMAIL_URL=closed, AGENTMAIL_KEY=key, **journal)
    env["HOME"] = str(tmp_path)
    done = agentmail("service-failed", "agentmail-gateway.service", env=env)
    assert done.returncode == 1
    assert "cannot be reached" in done.stderr and "nobody was mailed" in done.stderr
    assert "Traceback: the disk is full" in done.stderr
