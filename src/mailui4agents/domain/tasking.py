"""Who may set an agent to work, where, and how freely (docs/access.md).

Three rules decide, before anything is written, whether a mail may start or
continue work with an agent it is addressed to (`to` or `cc`):

1. **Taskers.** The person behind the mail must be one of the agent's taskers:
   its owners, and the people its owners added. A person's mail counts for that
   person; an agent's mail counts for the owners of the session the work comes
   from (the session it replies in, or for a new session the one the agent works
   in, `from_session_id`) — an agent may task another only within a session
   that one of the receiving agent's taskers started.
2. **Workspace roots.** The session's workspace must lie under one of the
   agent's roots (domain/roots.py); an agent without roots works nowhere. A
   session without a workspace is allowed: no bridge runs a turn without one.
   The agent's own terminal session is exempt (it already runs where its person
   started it; the bridge checks its own roots again before any turn).
3. **A mode ceiling.** A mail that creates a session may not ask for a mode
   above the ceiling of the person behind it (owners: `max_mode_owners`,
   default full; other taskers: `max_mode_taskers`, default workspace). A mail
   that asks for no mode gets the default, lowered to the ceiling. A session an
   agent creates is never freer than the session it comes from.

This module is pure: the service (services/tasking.py) loads the agents'
policies and applies these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.modes import MODES, Mode
from mailui4agents.domain.roots import allowed

OWNER, TASKER = "owner", "tasker"

#: Mail types that never start a turn: receipts and our own kind of notices.
#: A ``permission_decision`` mail is a receipt of a decision the waiting turn has
#: already received; a ``failure`` mail answered with a turn could loop between
#: two bridges; requests go to humans, never to agents; a ``work`` mail is a
#: bridge's record of a turn's diff (docs/review.md), and a turn on it would be a
#: turn about its own turn. The bridge starts no turn for them (bridge/replies.py),
#: so they set nobody to work.
NO_TURN_TYPES = frozenset(
    {MailType.PERMISSION_DECISION, MailType.PERMISSION_REQUEST, MailType.FAILURE, MailType.WORK}
)

_RANK: dict[str, int] = {m: i for i, m in enumerate(MODES)}


def rank(mode: str) -> int:
    """plan < workspace < full; an unknown mode ranks as full (never lower)."""
    return _RANK.get(mode, len(MODES) - 1)


def lowest(modes: Iterable[Mode]) -> Mode:
    return min(modes, key=rank)


def highest(modes: Iterable[Mode]) -> Mode:
    return max(modes, key=rank)


@dataclass(frozen=True)
class AgentPolicy:
    """One agent's rules, with the roles of the people a check asks about."""

    name: str
    roots: tuple[str, ...]
    max_mode_owners: Mode
    max_mode_taskers: Mode
    roles: Mapping[str, str] = field(default_factory=dict)  # person -> owner | tasker

    def role_of(self, person: str) -> str | None:
        return self.roles.get(person)

    def ceiling_for(self, person: str) -> Mode | None:
        """The highest mode `person` may ask for with this agent; None: not a tasker."""
        role = self.roles.get(person)
        if role == OWNER:
            return self.max_mode_owners
        if role == TASKER:
            return self.max_mode_taskers
        return None


@dataclass(frozen=True)
class Refusal:
    """Why a mail or a mode change may not go ahead: a 403 with this code."""

    code: str  # not_a_tasker | workspace_not_allowed | mode_not_allowed
    field: str
    message: str


def _roots_text(roots: tuple[str, ...]) -> str:
    if not roots:
        return "it has no workspace roots, so it works nowhere until an owner sets them"
    return "its workspace roots are " + ", ".join(roots)


def workspace_refusal(policy: AgentPolicy, workspace: str, field_: str) -> Refusal | None:
    """Rule 2 for one agent and one workspace."""
    if not workspace or allowed(policy.roots, workspace):
        return None
    return Refusal(
        "workspace_not_allowed",
        field_,
        f"agent '{policy.name}' may not work in '{workspace}': {_roots_text(policy.roots)}",
    )


def tasking_ceiling(
    policy: AgentPolicy, people: Iterable[str], *, by_agent: str | None, field_: str
) -> Mode | Refusal:
    """Rule 1: the highest mode the mail may start this agent in, or a Refusal.

    `people`: the sender (a person), or the owners of the session an agent's
    mail comes from (`by_agent` names that agent)."""
    ceilings = [c for c in (policy.ceiling_for(p) for p in people) if c is not None]
    if ceilings:
        return highest(ceilings)
    if by_agent is None:
        who = ", ".join(people) or "this sender"
        message = (
            f"{who} is not a tasker of agent '{policy.name}': only its owners and the "
            "people they add may set it to work"
        )
    else:
        message = (
            f"agent '{by_agent}' may set agent '{policy.name}' to work only within a "
            f"session that one of '{policy.name}'s taskers started"
        )
    return Refusal("not_a_tasker", field_, message)


def mode_refusal(asked: str, ceiling: Mode, agents: Iterable[str]) -> Refusal:
    names = ", ".join(f"'{a}'" for a in agents)
    return Refusal(
        "mode_not_allowed",
        "permission_mode",
        f"permission mode '{asked}' is above what you may start {names} in: at most '{ceiling}'",
    )


def start_mode(asked: Mode | None, default: Mode, ceiling: Mode) -> Mode:
    """Rule 3: the mode a new session starts in: the asked one (the caller has
    refused one above the ceiling, :func:`asks_too_much`), else the default
    lowered to the ceiling."""
    return asked if asked is not None else lowest((default, ceiling))


def asks_too_much(asked: str | None, ceiling: Mode) -> bool:
    return asked is not None and rank(asked) > rank(ceiling)


def change_refusal(
    policies: Iterable[AgentPolicy], person: str, current: str, new: str
) -> Refusal | None:
    """A decider changes a session's mode: lowering is always allowed (it takes
    power away); raising it must stay within the person's ceiling for every agent
    of the session (a decider who is no tasker of an agent may only lower)."""
    if rank(new) <= rank(current):
        return None
    over = [p for p in policies if (c := p.ceiling_for(person)) is None or rank(new) > rank(c)]
    if not over:
        return None
    ceilings = [p.ceiling_for(person) for p in over]
    known = [c for c in ceilings if c is not None]
    ceiling = lowest(known) if len(known) == len(ceilings) else None
    names = ", ".join(f"'{p.name}'" for p in over)
    if ceiling is None:
        message = (
            f"only the taskers of {names} may raise this session's mode "
            f"(you may lower it); it is '{current}'"
        )
    else:
        message = (
            f"permission mode '{new}' is above what you may set {names} to: at most '{ceiling}'"
        )
    return Refusal("mode_not_allowed", "permission_mode", message)
