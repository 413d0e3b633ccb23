"""E-mail that comes in (docs/email.md, "Not built yet"): whatever brought it (the
IMAP fetcher, the SMTP listener), `receive` decides what it is and does it, once
per message:

- a reply to a request e-mail (its reply address `<local>+<token>@<domain>`, or
  the token in References) decides the request when the first line that is not
  quoted and not a signature says so;
- a reply to an agent's e-mail goes into the session as that person's mail;
- a mail to `<agent>+<workspace alias>@<domain>` from a verified person starts
  new work;
- anything else is refused, and logged.

Every outcome is an `email_inbound` row (db/reach_tables.py), counted and logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mailui4agents.state import Gateway

Via = Literal["imap", "smtp"]
Outcome = Literal["decided", "posted", "started", "refused", "duplicate"]


@dataclass(frozen=True)
class Received:
    """What became of one inbound e-mail."""

    outcome: Outcome
    reason: str | None = None  # a short code when refused: bad_token, not_verified, …
    detail: str | None = None


async def receive(
    gw: Gateway, raw: bytes, *, via: Via, envelope_to: Sequence[str] = ()
) -> Received:
    """Act on one inbound e-mail, its whole RFC 5322 bytes. Safe to call twice
    with the same message (the second call is `duplicate`), so a transport
    removes the message from its source only after this returns. Never raises
    for what the message says: a malformed or hostile e-mail is `refused`."""
    raise NotImplementedError("e-mail in is not built yet")
