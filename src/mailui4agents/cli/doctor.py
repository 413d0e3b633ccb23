"""``agentmail doctor [--runner KIND]``: check what a bridge needs, and say what to fix.

Checks, in order, each printed as ``ok``/``FAIL``/``warn`` with what to do:

1. the gateway: ``AGENTMAIL_URL`` answers ``/healthz``, and the credential
   (``AGENTMAIL_KEY``, else the stored login) is accepted (one inbox read of
   one mail, not marked read);
2. with ``--runner``: the CLI binary is found and tells its version (a version
   other than the one the runner was checked with is a warning);
3. the hook wiring the runner configures: the very command line the bridge
   gives the CLI (``python -m mailui4agents.cli.main hook PLATFORM``, wrapped to
   fail closed) is run twice, with a read-only call (must allow) and a call that
   touches a protected path (must deny). Both are decided without the gateway,
   so the dry run asks nobody. A hook that cannot start, prints something the
   platform would not accept, or allows the protected call fails the check.

Exit status 0 when nothing failed (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mailui4agents.cli.common import load_config

#: The version each runner was checked against end to end (docs/platforms.md).
TESTED = {"claude-code": "2.1.197", "codex": "0.171.0", "gemini": "0.61.0"}
#: The hook platform a runner wires in, for runners that do not say
#: (``hook_platform`` on the runner wins).
HOOK_PLATFORM = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini": "gemini",
    "command": "generic",
}
FAIL_CLOSED = " || { echo 'the agentmail hook could not run: blocked to be safe' >&2; exit 2; }"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | FAIL
    detail: str
    fix: str = ""


def check_gateway() -> list[Check]:
    import anyio
    import httpx

    from mailui4agents.client import ApiError, AsyncClient

    config = load_config()
    checks: list[Check] = []
    try:
        r = httpx.get(config.url.rstrip("/") + "/healthz", timeout=10)
        ok = r.status_code == 200
        checks.append(
            Check(
                "gateway",
                "ok" if ok else "FAIL",
                f"{config.url}: HTTP {r.status_code}",
                "" if ok else "check AGENTMAIL_URL and that `agentmail serve` runs",
            )
        )
    except httpx.HTTPError as exc:
        checks.append(
            Check(
                "gateway",
                "FAIL",
                f"{config.url}: {exc}",
                "set AGENTMAIL_URL to the gateway's address; is it running?",
            )
        )
        return checks
    if not config.credential:
        checks.append(
            Check(
                "credential",
                "FAIL",
                "no AGENTMAIL_KEY and no stored login",
                "export AGENTMAIL_KEY=<the agent's key> (bridges speak for an agent)",
            )
        )
        return checks

    async def probe() -> None:
        async with AsyncClient(config) as client:
            await client.inbox(limit=1, mark_read=False)

    who = f"agent key ({config.agent_name or 'AGENTMAIL_KEY'})" if config.is_agent else "login"
    try:
        anyio.run(probe)
        checks.append(Check("credential", "ok", f"the gateway accepts the {who}"))
    except ApiError as exc:
        fix = (
            "the key was refused: ask an admin for the agent's current key "
            "(`agentmail agent rotate-key`)"
            if exc.status == 401
            else "see the gateway's message"
        )
        checks.append(Check("credential", "FAIL", f"{who}: {exc.status} {exc.message}", fix))
    except Exception as exc:  # network trouble between the two calls
        checks.append(Check("credential", "FAIL", f"{who}: {exc}", "check AGENTMAIL_URL"))
    if not config.is_agent:
        checks.append(
            Check(
                "credential",
                "warn",
                "a person's login, not an agent key",
                "a bridge needs AGENTMAIL_KEY (the agent's key)",
            )
        )
    return checks


def check_cli(runner: Any) -> list[Check]:
    missing = runner.missing()
    if missing is not None:
        return [
            Check(
                "cli",
                "FAIL",
                missing,
                "run scripts/install-agent-clis.sh or install the CLI; "
                "--runner-arg bin=PATH points the bridge at it",
            )
        ]
    version = runner.version()
    tested = TESTED.get(runner.name)
    if version is None:
        return [Check("cli", "warn", f"{runner.name}: found, but it did not tell its version")]
    if tested and version != tested:
        return [
            Check(
                "cli",
                "warn",
                f"{runner.name} {version} (checked with {tested})",
                f"if turns misbehave, try {tested} (agent-clis.txt)",
            )
        ]
    return [Check("cli", "ok", f"{runner.name} {version}")]


# -- the hook dry run ----------------------------------------------------------------------


def _sample(platform: str, tool: str, tool_input: dict[str, Any], cwd: str) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tool_name": tool,
        "tool_input": tool_input,
        "cwd": cwd,
        "session_id": "agentmail-doctor",
        "tool_use_id": "doctor-1",
    }
    if platform in ("claude-code", "codex"):
        base["hook_event_name"] = "PreToolUse"
    if platform == "gemini":
        base["hook_event_name"] = "BeforeTool"
        base.pop("tool_use_id")
    return base


#: (read tool, its input) per platform: allowed without asking anyone.
READ_CALL = {"gemini": ("read_file", {"absolute_path": "README.md"})}
Verdict = Callable[[str, int], str | None]  # stdout, exit -> "allow" | "deny" | None


def verdict(platform: str, out: str, code: int) -> str | None:
    """What the platform would make of the hook's answer (None: it would not accept it)."""
    if code == 2:
        return "deny"
    if code != 0:
        return None  # every supported platform lets the tool run on other codes
    try:
        data = json.loads(out) if out.strip() else {}
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if platform in ("claude-code", "codex"):
        specific = data.get("hookSpecificOutput") or {}
        decision = specific.get("permissionDecision")
        if decision == "deny":
            return "deny"
        if platform == "codex" and data == {}:
            return "allow"
        return "allow" if decision == "allow" else None
    if platform == "zcode":
        return {"approve": "allow", "block": "deny"}.get(str(data.get("decision")))
    return {"allow": "allow", "deny": "deny", "block": "deny"}.get(str(data.get("decision")))


def check_hook(platform: str) -> list[Check]:
    from mailui4agents.bridge.runners.claude_code import agentmail_command

    command = " ".join(shlex.quote(a) for a in agentmail_command("hook", platform)) + FAIL_CLOSED
    checks: list[Check] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
        env["AGENTMAIL_DATA_DIR"] = str(Path(tmp) / "data")  # the protected path
        protected = str(Path(tmp) / "data" / "agentmail.db")
        read_tool, read_input = READ_CALL.get(platform, ("Read", {"file_path": "README.md"}))
        shell = "run_shell_command" if platform == "gemini" else "Bash"
        cases = [
            ("hook allows a read", read_tool, read_input, "allow"),
            ("hook denies a protected path", shell, {"command": f"rm {protected}"}, "deny"),
        ]
        for name, tool, tool_input, wanted in cases:
            stdin = json.dumps(_sample(platform, tool, tool_input, tmp))
            try:
                done = subprocess.run(
                    ["sh", "-c", command],
                    input=stdin,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=env,
                    cwd=tmp,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                checks.append(Check(name, "FAIL", f"{command}: {exc}", "reinstall agentmail"))
                continue
            got = verdict(platform, done.stdout, done.returncode)
            if got == wanted:
                checks.append(Check(name, "ok", f"{platform}: {done.stdout.strip()[:100]}"))
            else:
                said = (done.stdout.strip() or done.stderr.strip())[:200]
                checks.append(
                    Check(
                        name,
                        "FAIL",
                        f"{platform} would {got or 'not accept'}: exit {done.returncode}, {said!r}",
                        "the bridge's Python must import mailui4agents: "
                        f"try `{command.split(' || ')[0]}` by hand",
                    )
                )
    return checks


@click.command("doctor")
@click.option("--runner", "kind", default=None, help="Also check this runner's CLI and hook.")
@click.option("--runner-arg", "runner_args", multiple=True, metavar="KEY=VALUE")
@click.option("--no-gateway", is_flag=True, help="Skip the gateway checks (offline).")
def doctor(kind: str | None, runner_args: tuple[str, ...], no_gateway: bool) -> None:
    """Check the gateway URL and key, the runner's CLI and version, and that the
    hook the bridge wires in answers (a dry run that asks nobody); print what to fix."""
    from mailui4agents.bridge.runners import KINDS, make_runner
    from mailui4agents.cli.bridge import _options

    checks: list[Check] = [] if no_gateway else check_gateway()
    if kind is not None:
        if kind not in KINDS:
            raise click.BadParameter(f"known: {', '.join(KINDS)}", param_hint="--runner")
        try:
            runner = make_runner(kind, [], _options(runner_args)) if kind != "command" else None
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--runner-arg") from exc
        if runner is not None:
            checks += check_cli(runner)
        platform = getattr(runner, "hook_platform", None) or HOOK_PLATFORM.get(kind)
        if platform:
            checks += check_hook(platform)
    failed = False
    for c in checks:
        failed = failed or c.status == "FAIL"
        click.echo(f"{c.status:4}  {c.name}: {c.detail}")
        if c.fix and c.status != "ok":
            click.echo(f"      fix: {c.fix}")
    click.echo("doctor: " + ("something to fix (above)" if failed else "all good"))
    raise SystemExit(1 if failed else 0)
