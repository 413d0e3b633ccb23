"""The ``agentmail`` command group; each command lives in its own module."""

from __future__ import annotations

import click

from mailui4agents import __version__
from mailui4agents.cli import approvals, discovery, install
from mailui4agents.cli.admin import agent, user
from mailui4agents.cli.auth import login
from mailui4agents.cli.hook import hook
from mailui4agents.cli.mail import inbox, read, send, thread
from mailui4agents.cli.watch import watch


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentmail")
def main() -> None:
    """Mail between people and AI coding agents.

    Client commands read AGENTMAIL_URL and AGENTMAIL_KEY (agents) or
    AGENTMAIL_TOKEN (people), falling back to what `agentmail login` stored.
    """


for command in (user, agent, login, send, inbox, read, thread, watch):
    main.add_command(command)
main.add_command(hook)
main.add_command(approvals.permissions)
main.add_command(approvals.approve)
main.add_command(approvals.deny)
main.add_command(approvals.answer)
main.add_command(approvals.grants)
main.add_command(approvals.revoke)
main.add_command(install.install_hook)
main.add_command(discovery.forward)
main.add_command(discovery.search)
main.add_command(discovery.contacts)

try:
    from mailui4agents.cli.serve import serve  # type: ignore[import-not-found, unused-ignore]
except ModuleNotFoundError as missing:
    # Only the gateway command itself may be absent (it is written separately);
    # a broken import inside it must still fail loudly.
    if missing.name != "mailui4agents.cli.serve":
        raise
else:
    main.add_command(serve)


if __name__ == "__main__":
    main()
