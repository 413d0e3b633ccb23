"""What a mail is (`mails.type`, the wire's `type`), and who it goes to.

The web UI names each type in words (web/render.type_word); the bridge starts a
turn only for a message or a relay (domain/tasking.NO_TURN_TYPES).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, NamedTuple


class MailType(StrEnum):
    MESSAGE = "message"
    """A person's or an agent's own mail."""
    RELAY = "relay"
    """An agent's answer to a mail, relayed back to its sender (docs/behaviour.md)."""
    PERMISSION_REQUEST = "permission_request"
    """An agent asks the session's deciders to approve a tool or answer a question."""
    PERMISSION_DECISION = "permission_decision"
    """The answer to a request: approved, denied, expired or cancelled."""
    FAILURE = "failure"
    """A bridge reports a turn that could not run."""
    SYSTEM = "system"
    """A notice of the gateway's own (an interactive session began)."""
    CALENDAR = "calendar"
    """A scheduled mail, delivered when its time came."""
    WORK = "work"
    """A bridge's record of what one turn changed in the session's worktree: its
    diff stat, `work.json` and the patch (docs/review.md). Never a turn."""


# What counts toward an agent's send budget (services/budgets.py): its own mail,
# scheduled mail included; requests, decisions and notices do not.
BUDGETED = (MailType.MESSAGE, MailType.RELAY, MailType.CALENDAR)

Role = Literal["to", "cc"]


class Recipient(NamedTuple):
    """One delivery of a mail: who, whether a person, and as "to" or "cc"."""

    name: str
    is_human: bool
    role: Role = "to"
