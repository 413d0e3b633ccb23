"""``agentmail mcp``: run the MCP server on stdin/stdout."""

from __future__ import annotations

import contextlib
import functools
import logging

import anyio
import click


@click.command("mcp")
@click.option(
    "--channel",
    is_flag=True,
    help="Also be a Claude Code channel: a person's mail arrives in the running "
    "session and permission prompts are relayed to the session's deciders "
    "(claude --dangerously-load-development-channels server:agentmail; "
    "docs/platforms.md).",
)
def mcp(channel: bool) -> None:
    """Serve the mail tools to an agent over MCP (stdio).

    Tools: send_mail, read_inbox, read_mail, read_thread, forward_mail,
    upload_attachment, download_attachment, suggest_address, list_contacts,
    session_participants, search_mail, ask_human, connect_to_server.

    Environment: AGENTMAIL_URL and AGENTMAIL_KEY (else the stored config),
    AGENTMAIL_SESSION_ID (the mail session every read is scoped to) and
    AGENTMAIL_ASK_TIMEOUT (seconds ask_human waits; default 50 — keep it below
    the agent platform's tool timeout). stdout is the protocol: logs go to stderr.

    With --channel (Claude Code only): also CLAUDE_CODE_SESSION_ID and
    CLAUDE_PROJECT_DIR, which Claude Code sets, and AGENTMAIL_OWNER (else the
    person who ran `agentmail login`), as for the interactive hooks.
    """
    # Imported here: the SDK is only needed by this command.
    from mailui4agents.mcp.server import serve_stdio

    logging.basicConfig(level=logging.WARNING, format="agentmail mcp: %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(functools.partial(serve_stdio, channel=channel))
