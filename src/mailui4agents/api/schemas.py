"""Request bodies (strict) and shared query types."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query
from pydantic import Field

from mailui4agents.api.validation import Id, StrictBody
from mailui4agents.domain.json_types import JsonObject

Mode = Literal["plan", "workspace", "full"]
Limit = Annotated[int, Query(ge=1, le=500)]


class LoginIn(StrictBody):
    username: str
    password: str


class TokenCreate(StrictBody):
    name: str = Field(min_length=1, max_length=200)


class UserCreate(StrictBody):
    username: str
    password: str
    is_admin: bool = False


class UserPatch(StrictBody):
    """Make a user an admin (`true`) or take it back (`false`)."""

    is_admin: bool


class PasswordIn(StrictBody):
    """A new password (8 to MAX_PASSWORD characters, services/identity.py)."""

    password: str


class MaxModeIn(StrictBody):
    """The highest mode an agent's owners / its other taskers may start it in."""

    owners: Mode | None = None
    taskers: Mode | None = None


class AgentCreate(StrictBody):
    """`owners`: the humans who see and adopt the agent's platform sessions and
    set it to work (default: the admin who creates it); `taskers`: further people
    who may set it to work; `workspaces`: its workspace roots (globs; none: it
    works nowhere until an owner sets them)."""

    name: str
    workspaces: list[str] | None = Field(default=None, max_length=50)
    owners: list[str] | None = Field(default=None, max_length=100)
    taskers: list[str] | None = Field(default=None, max_length=1000)
    max_mode: MaxModeIn | None = None


class AgentPolicyPatch(StrictBody):
    """An agent's workspace roots (replaced whole) and mode ceilings."""

    workspaces: list[str] | None = Field(default=None, max_length=50)
    max_mode: MaxModeIn | None = None


class NameIn(StrictBody):
    """A person to add (an agent's owner, a session's decider)."""

    name: str


class MailCreate(StrictBody):
    """A human's mail. `permission_mode` only when the mail creates a session;
    `worktree` ("own worktree", docs/review.md) too, and ignored on a reply."""

    to: list[str]
    cc: list[str] = []
    subject: str
    body: str
    parent_mail_id: Id | None = None
    attachment_ids: list[Id] = []
    permission_mode: Mode | None = None
    worktree: bool | None = None


class AgentMailCreate(StrictBody):
    """An agent's mail: no permission_mode (humans choose modes), plus relay fields."""

    to: list[str]
    cc: list[str] = []
    subject: str
    body: str
    parent_mail_id: Id | None = None
    attachment_ids: list[Id] = []
    from_session_id: Id | None = None
    relay: bool = False
    relay_key: str | None = None
    #: "failure": a bridge reports a turn that could not run; "work": a bridge's
    #: record of what a turn changed (docs/review.md). Neither starts a turn.
    type: Literal["message", "failure", "work"] = "message"


class MarkRead(StrictBody):
    session_id: Id | None = None
    mail_ids: list[Id] | None = None


class SessionPatch(StrictBody):
    alias: str | None = None
    permission_mode: Mode | None = None
    archived: bool | None = None


class AliasProposal(StrictBody):
    """An agent's suggested name for its session (checked by the service)."""

    alias: str = Field(max_length=1000)


class OptionIn(StrictBody):
    label: str = Field(min_length=1, max_length=200)
    description: str | None = None


class PermissionCreate(StrictBody):
    session_id: Id
    kind: Literal["approval", "question"] = "approval"
    tool_name: str | None = Field(default=None, max_length=200)
    tool_input: JsonObject | None = None
    summary: str | None = None
    relay_key: str
    question: str | None = None
    options: list[OptionIn] | None = None
    multi_select: bool = False
    timeout_s: int | None = Field(default=None, ge=1, le=86400)
    # The SHA-256 of the workspace's .agentmail/rules.toml as the hook read it
    # now (docs/rules.md, "The rule file"); absent: no file or an older hook.
    rules_file_sha256: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    #: The bridge proved its sandbox for this turn (docs/sandbox.md): in workspace
    #: mode the gateway then allows the call without asking (409 mode_allows).
    sandbox: Literal["proven"] | None = None


class WithdrawIn(StrictBody):
    """The agent's terminal answered its own dialog first: withdraw the agent's
    pending requests whose relay key starts with this prefix."""

    relay_key_prefix: str = Field(min_length=8, max_length=160)


class DecisionIn(StrictBody):
    decision: Literal["approve", "deny"]
    note: str | None = None
    always: bool = False
    grant_pattern: str | None = None
    answers: list[str] | None = None


class InteractiveSessionIn(StrictBody):
    """Bind (or create) the mail session of an interactive platform session."""

    platform_id: str = Field(min_length=1, max_length=500)
    owner: str = Field(min_length=1)
    cwd: str
    title: str | None = None


class WaitingIn(StrictBody):
    """An interactive agent waits for its person (services/waiting.py): `turn`
    names the turn (Claude Code's prompt_id, Codex's turn_id); one notice per
    session, kind and turn."""

    kind: Literal["input", "permission"]
    message: str = Field(min_length=1, max_length=200)
    excerpt: str | None = Field(default=None, max_length=2000)
    turn: str = Field(min_length=1, max_length=200)


class ForwardIn(StrictBody):
    """Forward a mail (quoted) to new recipients. `session_id`: the session an
    agent works in (its read scope); humans leave it out."""

    to: list[str]
    cc: list[str] = []
    note: str | None = None
    session_id: Id | None = None
