"""Why a turn could not run, in plain words with what to do
(docs/behaviour.md#replies-relays-budgets-loops: failure mail).

:func:`classify` turns what a runner saw (its error text, the exit status,
whether the CLI was found, whether the turn resumed a session) into a
:class:`Failure`; :func:`failure_body` writes the mail. Pure functions: the
bridge decides nothing here, it only reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal[
    "cli_missing",
    "auth",
    "quota",
    "no_model",
    "timeout",
    "resume_failed",
    "workspace_missing",
    "workspace_not_allowed",
    "gave_up",
    "error",
]

#: Kinds where trying the same mail again cannot help.
PERMANENT: frozenset[Kind] = frozenset(
    {
        "cli_missing",
        "auth",
        "quota",
        "no_model",
        "timeout",
        "resume_failed",
        "workspace_missing",
        "workspace_not_allowed",
    }
)

_AUTH = re.compile(
    r"\b401\b|(?:invalid|incorrect)[ _-]?api[ _-]?key|authentication[_ ]error|not logged in|/login|"
    r"unauthori[sz]ed|invalid x-api-key|OAuth token",
    re.IGNORECASE,
)
_QUOTA = re.compile(
    r"\b402\b|\b429\b|quota|credit balance|insufficient[_ ]credit|billing|rate[_ ]limit|"
    r"usage limit|payment required",
    re.IGNORECASE,
)
_NO_MODEL = re.compile(
    r"no model|model[^\n]{0,40}not (?:found|available|configured|exist)|unknown model|"
    r"model_not_found|invalid model|not_found_error",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Failure:
    """One reason a turn did not produce an answer."""

    kind: Kind
    detail: str  # what the CLI or the bridge said, quoted in the mail

    @property
    def permanent(self) -> bool:
        return self.kind in PERMANENT


def classify(detail: str, *, resumed: bool = False) -> Failure:
    """The kind of failure that ``detail`` (error text, stderr tail) describes."""
    if _AUTH.search(detail):
        return Failure("auth", detail)
    if _QUOTA.search(detail):
        return Failure("quota", detail)
    if _NO_MODEL.search(detail):
        return Failure("no_model", detail)
    if resumed:
        return Failure("resume_failed", detail)
    return Failure("error", detail)


_WHAT: dict[Kind, tuple[str, str]] = {
    "cli_missing": (
        "the agent's command-line program is not installed on the machine that runs the bridge",
        "Install it (or fix the bridge's PATH / --runner-arg) and send the mail again.",
    ),
    "auth": (
        "the agent is not logged in to its model provider, or its API key was refused (401)",
        "Log the agent CLI in again or give it a valid API key on the bridge's machine, "
        "then send the mail again.",
    ),
    "quota": (
        "the model provider refused the request for lack of credit or quota (402/429)",
        "Add credit or raise the quota with the provider (or wait until the limit resets), "
        "then send the mail again.",
    ),
    "no_model": (
        "no usable model is configured for the agent CLI",
        "Configure a model for the CLI on the bridge's machine (or pass one with "
        "--runner-arg), then send the mail again.",
    ),
    "timeout": (
        "the turn timed out: it ran longer than the bridge's --turn-timeout and was stopped",
        "Split the task into smaller steps, or raise --turn-timeout; your next mail in this "
        "session will run normally.",
    ),
    "resume_failed": (
        "the agent could not resume this session's earlier conversation",
        "Start a new session (mail the agent at a '.new' address) — for example to change "
        "the model: resuming never silently swaps the model.",
    ),
    "workspace_missing": (
        "the session's workspace does not exist on the machine that runs the bridge",
        "Mail the agent with a workspace path that exists there, or create that folder.",
    ),
    "workspace_not_allowed": (
        "the session's workspace is outside the folders the bridge lets this agent work in "
        "(its --workspace-root), whatever the gateway allows",
        "Mail the agent with a workspace under one of the bridge's roots (listed below), or "
        "ask whoever runs the bridge to add a root for it.",
    ),
    "gave_up": (
        "the turn failed again and again, so the bridge gave up on this mail",
        "Look at the bridge's log on its machine; send the mail again once the cause is fixed.",
    ),
    "error": (
        "the agent CLI failed",
        "Look at the details below and the bridge's log; send the mail again once it is fixed.",
    ),
}

MAX_DETAIL_CHARS = 2000


def failure_subject(kind: Kind, subject: str) -> str:
    label = "timed out" if kind == "timeout" else "could not be handled"
    return f"Failed ({label}): {subject}"


def failure_body(failure: Failure, *, agent: str, subject: str) -> str:
    """The failure mail: what happened, what to do, and the details."""
    what, todo = _WHAT[failure.kind]
    detail = failure.detail.strip() or "(no further details)"
    if len(detail) > MAX_DETAIL_CHARS:
        detail = "…" + detail[-MAX_DETAIL_CHARS:]
    return (
        f'Your mail "{subject}" to {agent} could not be handled: {what}.\n\n'
        f"What to do: {todo}\n\n"
        f"Details:\n{detail}\n"
    )
