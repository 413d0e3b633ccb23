"""New work by e-mail (docs/email.md): a verified person mails
`<agent>+<workspace alias>@<domain>`; the mail starts a new session of that agent
in the workspace the admin named so (`workspace_aliases`), mode `workspace`
unless the subject says `[plan]` or `[full]` and the person may ask for it.
services/email_inbound.py calls `start` once it has checked the sender."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mailui4agents.domain.email_parts import InboundFile
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway


@dataclass(frozen=True)
class Started:
    session_id: str
    mail_id: str


class NoSuchPlace(Exception):
    """The agent or the workspace alias does not exist (or the person may not
    task it): the message says what does, for the reply to the person."""


async def start(
    gw: Gateway,
    person: Principal,
    *,
    agent: str,
    alias: str,
    subject: str,
    body: str,
    files: Sequence[InboundFile] = (),
    email_message_id: str | None = None,
) -> Started:
    """Start the session and send its first mail as `person`."""
    raise NotImplementedError("new work by e-mail is not built yet")
