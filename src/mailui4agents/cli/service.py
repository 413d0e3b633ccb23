"""``agentmail install-service`` (systemd units) and ``agentmail service-failed``
(what their OnFailure= unit runs), docs/service.md."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

JOURNAL_LINES_MAX = 500


def _agentmail_path(given: Path | None) -> Path:
    if given is not None:
        path = given
    else:
        beside = Path(sys.executable).parent / "agentmail"  # the venv this runs in
        found = shutil.which("agentmail")
        path = beside if beside.exists() else Path(found) if found else beside
    path = path.absolute()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise click.BadParameter(f"{path} is not an executable", param_hint="--agentmail")
    return path


def _unit_dir(user: bool, given: Path | None) -> Path:
    if given is not None:
        return given
    if user:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(base) / "systemd" / "user"
    return Path("/etc/systemd/system")


def _config_dir(user: bool) -> Path:
    if user:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(base) / "agentmail"
    return Path("/etc/agentmail")


def _absolute(paths: tuple[Path, ...] | list[Path], hint: str) -> list[Path]:
    out = []
    for p in paths:
        if not p.is_absolute():
            raise click.BadParameter(f"{p}: give an absolute path", param_hint=hint)
        out.append(p)
    return out


@click.command("install-service", context_settings={"ignore_unknown_options": True})
@click.argument("what", type=click.Choice(["gateway", "bridge"]))
@click.option("--user", "user_unit", is_flag=True, help="A `systemctl --user` unit.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="gateway: its data dir, the one directory it may write "
    "(default /var/lib/agentmail; --user: ~/.local/share/agentmail).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="bridge: its --state-dir (default /var/lib/agentmail-bridge; "
    "--user: ~/.local/state/agentmail-bridge).",
)
@click.option(
    "--workspace-root",
    "workspace_roots",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="bridge: a directory its agents work in (repeatable; writable, passed on).",
)
@click.option(
    "--writable",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="bridge: another directory its agent CLIs write (e.g. ~/.claude; repeatable).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="gateway: --host.")
@click.option("--port", default=8025, show_default=True, type=int, help="gateway: --port.")
@click.option(
    "--run-as",
    default="agentmail",
    show_default=True,
    help="System units: the account the service runs as (create it first).",
)
@click.option(
    "--unit-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where to write the units (default /etc/systemd/system; --user: ~/.config/systemd/user).",
)
@click.option(
    "--env-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The environment file the units read (secrets: AGENTMAIL_KEY, SMTP "
    "password…); default /etc/agentmail/NAME.env or ~/.config/agentmail/NAME.env.",
)
@click.option(
    "--agentmail",
    "agentmail_bin",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The agentmail executable the units run (default: this one).",
)
@click.option("--force", is_flag=True, help="Overwrite units that exist.")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def install_service(
    what: str,
    user_unit: bool,
    data_dir: Path | None,
    state_dir: Path | None,
    workspace_roots: tuple[Path, ...],
    writable: tuple[Path, ...],
    host: str,
    port: int,
    run_as: str,
    unit_dir: Path | None,
    env_file: Path | None,
    agentmail_bin: Path | None,
    force: bool,
    extra: tuple[str, ...],
) -> None:
    """Write a hardened systemd unit for the gateway or a bridge, and the
    agentmail-failed@.service unit that mails the admin when it fails for good.
    Arguments after `--` go to `agentmail serve` / `agentmail bridge` as they are.
    Nothing is enabled or started: the commands to do so are printed."""
    from mailui4agents.ops import units

    exe = _agentmail_path(agentmail_bin)
    home = Path.home()
    if what == "gateway":
        if workspace_roots or writable or state_dir:
            raise click.UsageError("--state-dir, --workspace-root, --writable are for a bridge")
        default = home / ".local/share/agentmail" if user_unit else Path("/var/lib/agentmail")
        data = _absolute([data_dir or default], "--data-dir")[0]
        args = ["serve", "--data-dir", str(data), "--host", host, "--port", str(port), *extra]
        paths = [data]
        name, description = units.GATEWAY_UNIT, "MailUI4Agents gateway (agentmail serve)"
    else:
        if data_dir:
            raise click.UsageError("--data-dir is for the gateway; a bridge has --state-dir")
        default = (
            home / ".local/state/agentmail-bridge"
            if user_unit
            else Path("/var/lib/agentmail-bridge")
        )
        state = _absolute([state_dir or default], "--state-dir")[0]
        roots = _absolute(list(workspace_roots), "--workspace-root")
        if not roots:
            raise click.UsageError("a bridge needs --workspace-root DIR: where its agents work")
        args = ["bridge", "--state-dir", str(state)]
        for root in roots:
            args += ["--workspace-root", str(root)]
        args += list(extra)
        paths = [state, *roots, *_absolute(list(writable), "--writable")]
        name, description = units.BRIDGE_UNIT, "MailUI4Agents bridge (agentmail bridge)"
    env = (
        env_file or _config_dir(user_unit) / f"{name.split('.')[0].removeprefix('agentmail-')}.env"
    )
    opts = units.UnitOptions(
        agentmail=exe,
        user_unit=user_unit,
        run_as=None if user_unit else run_as,
        env_file=_absolute([env.absolute()], "--env-file")[0],
        writable=paths,
        args=args,
    )
    failed_opts = units.UnitOptions(
        agentmail=exe,
        user_unit=user_unit,
        run_as=None if user_unit else run_as,
        env_file=opts.env_file.with_name("notify.env"),
        writable=(),
    )
    try:
        texts = {
            name: units.service_unit(description, opts),
            units.FAILED_TEMPLATE: units.failed_unit(failed_opts),
        }
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    target = _unit_dir(user_unit, unit_dir)
    if not force:
        taken = [n for n in texts if (target / n).exists()]
        if taken:
            raise click.ClickException(f"{target / taken[0]} exists: give --force to overwrite it")
    target.mkdir(parents=True, exist_ok=True)
    for unit_name, text in texts.items():
        tmp = target / f".{unit_name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(target / unit_name)
        click.echo(f"wrote {target / unit_name}")
    ctl = "systemctl --user" if user_unit else "systemctl"
    owner = "" if user_unit else f" (owned by {run_as})"
    click.echo(
        f"Next: create {', '.join(map(str, paths))}{owner}; put secrets in {opts.env_file} "
        f"and the admin notice's sender (AGENTMAIL_URL, AGENTMAIL_KEY) in "
        f"{failed_opts.env_file}; then:\n  {ctl} daemon-reload && {ctl} enable --now {name}"
    )


def _journal(unit: str, user: bool, lines: int) -> str:
    cmd = ["journalctl", "--user-unit" if user else "--unit", unit, "-n", str(lines)]
    cmd += ["--no-pager", "-o", "short-iso"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(journalctl could not run: {exc})"
    out = done.stdout.strip()
    if done.returncode != 0:
        out += f"\n(journalctl exited {done.returncode}: {done.stderr.strip()[-500:]})"
    return out or "(the journal has no lines of this unit)"


@click.command("service-failed")
@click.argument("unit")
@click.option("--user", "user_unit", is_flag=True, help="The unit is a `systemctl --user` one.")
@click.option(
    "--to",
    "to",
    default="admin@.new",
    show_default=True,
    help="Who is told: an address (a new session of its own by default).",
)
@click.option(
    "--lines",
    default=50,
    show_default=True,
    type=click.IntRange(1, JOURNAL_LINES_MAX),
    help="How many of the journal's last lines to send.",
)
def service_failed(unit: str, user_unit: bool, to: str, lines: int) -> None:
    """Mail --to that the systemd unit UNIT failed, with the journal's last lines
    (run by agentmail-failed@.service). Sent through the gateway of
    AGENTMAIL_URL with AGENTMAIL_KEY or AGENTMAIL_TOKEN; when the gateway cannot
    be reached (it is the unit that failed), the report goes to stderr — the
    journal — and the exit status is 1."""
    import anyio

    from mailui4agents.cli.common import describe, load_config
    from mailui4agents.client import ApiError, AsyncClient
    from mailui4agents.client.errors import GatewayUnreachable

    host = socket.gethostname()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    subject = f"{unit} failed on {host}"
    body = (
        f"The systemd unit {unit} on {host} failed at {when} and systemd gave up "
        f"restarting it.\n\nIts journal's last {lines} lines:\n\n"
        f"{_journal(unit, user_unit, lines)}\n"
    )
    config = load_config()
    if not config.credential:
        click.echo(
            f"agentmail service-failed: no AGENTMAIL_KEY or AGENTMAIL_TOKEN: the notice "
            f"could not be mailed. {subject}.\n{body}",
            err=True,
        )
        raise SystemExit(1)

    async def send() -> None:
        async with AsyncClient(config) as client:
            await client.send_mail(to=[to], subject=subject, body=body)

    try:
        anyio.run(send)
    except GatewayUnreachable as exc:
        click.echo(
            f"agentmail service-failed: the gateway at {config.url} cannot be reached "
            f"({exc}), so nobody was mailed: {subject}.\n{body}",
            err=True,
        )
        raise SystemExit(1) from None
    except ApiError as exc:
        click.echo(
            f"agentmail service-failed: the gateway refused the notice ({describe(exc)}): "
            f"{subject}.\n{body}",
            err=True,
        )
        raise SystemExit(1) from None
    click.echo(f"mailed {to}: {subject}")
