"""The ``agentmail`` command group; each command lives in its own module.

Commands are imported only when they run. Two reasons: a hook runs once per tool
call of an agent, so it must not pay for importing every other command (and the
HTTP client when a decision needs no gateway); and a broken import in one command
must not break the others — a hook that crashes on start-up exits 1, which
Claude Code and Gemini treat as "go ahead".
"""

from __future__ import annotations

import sys

from mailui4agents.cli.fast_hook import hook_fast_path

if __name__ == "__main__":
    # `python -m mailui4agents.cli.main hook NAME` (the bridge's hook command):
    # answered and exited before click is imported (mailui4agents/cli/fast_hook.py).
    hook_fast_path(sys.argv[1:])

import importlib

import click

from mailui4agents import __version__

# command name -> "module:attribute"
COMMANDS = {
    "serve": "mailui4agents.cli.serve:serve",
    "user": "mailui4agents.cli.admin:user",
    "agent": "mailui4agents.cli.admin:agent",
    "workspace": "mailui4agents.cli.workspace:workspace",
    "login": "mailui4agents.cli.auth:login",
    "logout": "mailui4agents.cli.auth:logout",
    "tokens": "mailui4agents.cli.auth:tokens",
    "pair": "mailui4agents.cli.devices:pair",
    "devices": "mailui4agents.cli.devices:devices",
    "notify": "mailui4agents.cli.notify:notify",
    "send": "mailui4agents.cli.mail:send",
    "inbox": "mailui4agents.cli.mail:inbox",
    "read": "mailui4agents.cli.mail:read",
    "thread": "mailui4agents.cli.mail:thread",
    "watch": "mailui4agents.cli.watch:watch",
    "forward": "mailui4agents.cli.discovery:forward",
    "search": "mailui4agents.cli.discovery:search",
    "contacts": "mailui4agents.cli.discovery:contacts",
    "permissions": "mailui4agents.cli.approvals:permissions",
    "approve": "mailui4agents.cli.approvals:approve",
    "deny": "mailui4agents.cli.approvals:deny",
    "answer": "mailui4agents.cli.approvals:answer",
    "grants": "mailui4agents.cli.approvals:grants",
    "revoke": "mailui4agents.cli.approvals:revoke",
    "deciders": "mailui4agents.cli.approvals:deciders",
    "rules": "mailui4agents.cli.rules:rules",
    "audit": "mailui4agents.cli.audit:audit",
    "work": "mailui4agents.cli.work:work",
    "hook": "mailui4agents.cli.hook:hook",
    "install-hook": "mailui4agents.cli.install_cmd:install_hook",
    "mcp": "mailui4agents.cli.mcp_cmd:mcp",
    "install-mcp": "mailui4agents.cli.install_mcp:install_mcp",
    "bridge": "mailui4agents.cli.bridge:bridge",
    "schedule": "mailui4agents.cli.calendar:schedule",
    "calendar": "mailui4agents.cli.calendar:calendar",
    "export": "mailui4agents.cli.export:export",
    "db": "mailui4agents.cli.db:db",
    "doctor": "mailui4agents.cli.doctor:doctor",
    "backup": "mailui4agents.cli.backup:backup",
    "restore": "mailui4agents.cli.backup:restore",
    "install-service": "mailui4agents.cli.service:install_service",
    "service-failed": "mailui4agents.cli.service:service_failed",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentmail")
def main() -> None:
    """Mail between people and AI coding agents.

    Client commands read AGENTMAIL_URL and AGENTMAIL_KEY (agents) or
    AGENTMAIL_TOKEN (people), falling back to what `agentmail login` stored.
    """


if __name__ == "__main__":
    main()
