"""The ``agentmail install-hook`` command (the work is in cli/install.py and,
for ``--interactive``, cli/install_interactive.py)."""

from __future__ import annotations

from pathlib import Path

import click

from mailui4agents.cli import install as install_module
from mailui4agents.cli.common import fail
from mailui4agents.cli.install import (
    CODEX,
    DSH,
    MIN_TIMEOUT_S,
    PI,
    PLATFORMS,
    SettingsError,
    hook_command,
    install,
    install_pi,
    pi_extension_path,
    pi_extension_text,
    report,
    settings_path_for,
    timeout_warnings,
)
from mailui4agents.cli.install_interactive import install_interactive


@click.command("install-hook")
@click.argument(
    "platform_name", metavar="PLATFORM", type=click.Choice(sorted([*PLATFORMS, PI, DSH]))
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    metavar="DIR",
    help="Install into DIR's settings (default: your user settings in the home directory).",
)
@click.option(
    "--timeout",
    type=click.IntRange(MIN_TIMEOUT_S, 86400),
    metavar="SECONDS",
    help="How long the platform lets the hook run, in seconds "
    "(default: Claude Code and Codex 600, Gemini 60, ZCode 60; written to Gemini's file in ms; "
    "pi: how long the hook waits for a person).",
)
@click.option(
    "--interactive",
    is_flag=True,
    help="Claude Code in a terminal: its own dialog and the session's deciders race, the "
    "first answer wins; also 'waiting for you' notices and mail into the running session "
    "(docs/platforms.md, 'Interactive sessions').",
)
@click.option(
    "--node-modules",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    metavar="DIR",
    help="dsh: link the profile's node_modules to DIR (where @deepseek-ai/dsh-acp is installed).",
)
def install_hook(
    platform_name: str,
    project: str | None,
    timeout: int | None,
    interactive: bool = False,
    node_modules: Path | None = None,
) -> None:
    """Make PLATFORM (claude-code, codex, gemini, zcode, pi, dsh) ask agentmail before guarded
    tool use.

    Merges an `agentmail hook PLATFORM` entry into the platform's settings
    (Codex: hooks.json in $CODEX_HOME or DIR/.codex; ZCode:
    ~/.zcode/cli/config.json, hooks.events), keeping everything else;
    for pi, which has no hook setting, writes the agentmail gate extension into
    pi's extensions folder; for dsh, writes the ACP profile with the agentmail
    plugin into $DSH_HOME/profiles/acp. Running it again changes nothing.
    """
    if platform_name == DSH:
        _install_dsh(node_modules)
        return
    if interactive:
        install_interactive(platform_name, project, timeout)
        return
    executable = install_module.agentmail_executable()  # looked up late: tests replace it
    if platform_name == PI:
        path = pi_extension_path(project)
        try:
            result = install_pi(path, pi_extension_text(executable, timeout))
        except (SettingsError, OSError) as error:
            fail(f"not changing {path}: {error}")
        report(
            result,
            executable,
            unchanged=f"agentmail gate for pi already installed in {path}; no change.",
            done=f"Installed the agentmail gate extension for pi in {path}.",
        )
        return
    platform = PLATFORMS[platform_name]
    if platform.user_level_only and project is not None:
        fail(f"{platform.name} reads hooks from the user's config only; run without --project")
    path = settings_path_for(platform, project)
    command = hook_command(platform, executable, timeout)
    try:
        result = install(platform, path, command, timeout)
    except (SettingsError, OSError) as error:
        fail(f"not changing {path}: {error}")
    for warning in timeout_warnings(platform, command, timeout or platform.default_timeout_s):
        click.echo(f"warning: {warning}", err=True)
    report(
        result,
        executable,
        unchanged=f"agentmail hook for {platform.name} already installed in {path}; no change.",
        done=f"Installed the agentmail hook for {platform.name} in {path}.",
    )
    if platform is CODEX and result.changed:
        click.echo(
            "Codex runs a new hook only once it is trusted: open `codex`, type /hooks and "
            "trust it (headless runs: --dangerously-bypass-hook-trust). Until then Codex "
            "skips it without a word."
        )


def _install_dsh(node_modules: Path | None) -> None:
    from mailui4agents.bridge.runners.dsh import dsh_home
    from mailui4agents.cli.install_dsh import install_profile

    try:
        folder, changed = install_profile(dsh_home(), node_modules)
    except (SettingsError, OSError) as error:
        fail(f"not changing the dsh profile: {error}")
    if not changed:
        click.echo(f"agentmail profile for dsh already installed in {folder}; no change.")
    else:
        click.echo(f"Installed the agentmail profile for dsh in {folder} ({', '.join(changed)}).")
    if not (folder / "node_modules").exists():
        click.echo(
            f"warning: {folder} has no node_modules: run `npm install --legacy-peer-deps` "
            "there, or pass --node-modules DIR",
            err=True,
        )
