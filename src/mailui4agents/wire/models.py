"""Response shapes of the gateway API (docs/api.md, "Shapes").

Lenient on purpose (`extra="allow"`): a newer gateway may add fields and an
older client keeps them instead of failing. The gateway validates what it sends
against these models (`response_model`) and the client parses with the same
ones (client/models.py), so there is one definition of each shape.

Times are `Timestamp`: a timezone-aware datetime in Python, RFC 3339 in UTC with
a `Z` on the wire (the gateway's own format, so a round trip is exact).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from mailui4agents.domain.json_types import JsonObject as JsonObject
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.events import EventType

T = TypeVar("T")


Timestamp = Annotated[datetime, PlainSerializer(rfc3339, return_type=str, when_used="json")]


class Lenient(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import.
    # A hook or CLI process uses a handful of these models; building them all
    # made every such process start much slower (bench/approval.py).
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class AttachmentRef(Lenient):
    """An attachment as listed on a mail (and as an upload answers it)."""

    attachment_id: str
    name: str
    size: int
    content_type: str | None = None
    sha256: str | None = None


class NewMailEvent(Lenient):
    """Data of a `new_mail` event: a mail (MailOut) without its MAIL_ONLY_FIELDS.

    These declarations are for typed access only: each is a field of MailOut
    with the same type (tests/services/test_mail_builder.py), and the gateway
    sends every field of the projection whether declared here or not (a newer
    one is kept as an extra)."""

    mail_id: str
    session_id: str
    session_alias: str | None = None
    workspace: str | None = None
    type: str
    from_: str = Field(alias="from")
    from_human: bool = False  # missing counts as agent
    to: list[str]
    cc: list[str] = Field(default_factory=list)
    subject: str
    in_reply_to: str | None = None
    reply_address: str | None = None
    self_address: str | None = None
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_session_id: str | None = None
    worktree: bool = False
    created_at: Timestamp


class MailOut(Lenient):
    """A mail as the gateway returns it (read, thread, send). `from` is `from_`."""

    id: str
    session_id: str
    session_alias: str | None = None
    workspace: str | None = None
    type: str
    from_: str = Field(alias="from")
    from_human: bool = False
    to: list[str]
    cc: list[str] = Field(default_factory=list)
    subject: str
    body: str = ""
    body_truncated: bool = False
    parent_mail_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    relay: bool = False
    created_at: Timestamp
    read: bool = False
    reply_address: str | None = None
    self_address: str | None = None
    # The rest of the `new_mail` fields (a mail row can stand for its event), then
    # the sender's bare name. Declared last: the order keys have on the wire.
    mail_id: str | None = None
    in_reply_to: str | None = None
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_session_id: str | None = None
    # The session runs in a worktree of its own (docs/review.md): the event carries it.
    worktree: bool = False
    from_name: str | None = None


MAIL_ONLY_FIELDS = frozenset(
    ("id", "body", "body_truncated", "parent_mail_id", "attachments", "relay", "read", "from_name")
)
"""The fields of MailOut a `new_mail` event does not carry (the body and what one
reader's copy knows). The event is every other field of the mail
(services/wire_shapes.new_mail_data): a field added to MailOut reaches the event by itself."""


class InboxItem(MailOut):
    """An inbox row: the same shape as MailOut (every field `new_mail` carries)."""


class SessionOut(Lenient):
    """A session (a thread) as one viewer sees it."""

    id: str
    alias: str | None = None
    workspace: str | None = None
    status: str
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_id: str | None = None
    hop_limit: int | None = None
    participants: list[Any] = Field(default_factory=list)
    deciders: list[str] = Field(default_factory=list)
    created_at: Timestamp
    last_mail_at: Timestamp | None = None
    unread: int = 0
    pending_permissions: int = 0
    proposed_alias: str | None = None
    proposed_by: str | None = None
    worktree: bool = False


class OptionOut(Lenient):
    """One choice of a question."""

    label: str
    description: str | None = None


class DecidedVia(Lenient):
    """Where a decision came from (docs/remote.md, "First answer wins"): web, api,
    cli, mcp, push, email, terminal, grant or system (expired, cancelled); `device`
    names the paired device a push action came from."""

    channel: str
    device: str | None = None


class PermissionOut(Lenient):
    """A permission request (an approval or a question) and its outcome."""

    id: str
    session_id: str
    kind: str
    agent: str
    tool_name: str | None = None
    tool_input: JsonObject | None = None
    summary: str | None = None
    question: str | None = None
    options: list[OptionOut] | None = None
    multi_select: bool = False
    status: str
    decision: str | None = None
    note: str | None = None
    answers: list[str] | None = None
    decided_by: str | None = None
    decided_at: Timestamp | None = None
    decided_via: DecidedVia | None = None
    expires_at: Timestamp | None = None
    relay_key: str | None = None
    mail_id: str | None = None
    grant_id: str | None = None
    created_at: Timestamp


class GrantOut(Lenient):
    """A standing approval: `tool_name` calls matching `pattern` in a session.

    `scope` says what `pattern` means: "exact" (the one approved command, path
    or input), "prefix" (a command or path prefix) or "every" (every input; the
    pattern `*`). `covers` says it in words. `legacy_every_input`: made without a
    pattern before migration 0013, when that meant every input of the tool,
    which it still covers (docs/behaviour.md#grants)."""

    id: str
    session_id: str
    tool_name: str
    pattern: str | None = None
    scope: str | None = None
    covers: str | None = None
    legacy_every_input: bool = False
    created_by: str
    request_id: str | None = None
    created_at: Timestamp
    revoked_at: Timestamp | None = None


class DeciderOut(Lenient):
    """Who may decide in a session: an owner or a named decider."""

    name: str
    role: str
    added_by: str | None = None
    created_at: Timestamp | None = None


class Withdrawn(Lenient):
    """The requests an agent's terminal answered first, now closed."""

    withdrawn: list[str]


class WaitingOut(Lenient):
    """A "waiting for you" notice: `deduplicated` when this turn's notice was
    sent before (or a pending request already reached the person); `pushed`, the
    devices it was queued to."""

    deduplicated: bool
    pushed: int


class Duplicate(Lenient):
    """A relay key used before by the same sender: nothing was written. It names
    the first mail (`mail_id`) or request (`request_id`)."""

    status: str = "duplicate_relay"
    mail_id: str | None = None
    request_id: str | None = None


class Page(Lenient, Generic[T]):
    """One page of a list endpoint; `next_cursor` is None on the last page."""

    items: list[T]
    next_cursor: str | None = None


def to_json(model: BaseModel) -> JsonObject:
    """The JSON object a model stands for, exactly the fields it was given (the
    payload of a stored event; what a route's `response_model_exclude_unset` sends)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


# -- health -------------------------------------------------------------------------


class HealthOut(Lenient):
    """`/healthz`: the process answers."""

    status: str


class ReadyOut(Lenient):
    """`/readyz`: `ready` (200) at the newest migration; `migrating` (503, with
    `head`) or `unavailable` (503, with `error`) otherwise."""

    status: str
    revision: str | None = None
    head: str | None = None
    error: str | None = None


# -- auth and admin -----------------------------------------------------------------


class LoginUser(Lenient):
    username: str
    is_admin: bool


class LoginOut(Lenient):
    """A login token (expires after `login_token_ttl_s`) and who it is for."""

    token: str
    user: LoginUser


class TokenCreated(Lenient):
    """A named personal token, shown only this once."""

    token: str
    name: str


class TokenOut(Lenient):
    """One of the caller's usable tokens (never its secret); `current`: this request's."""

    id: str
    name: str
    created_at: Timestamp
    expires_at: Timestamp | None = None
    current: bool = False


class Revoked(Lenient):
    """The id of the token or key just revoked."""

    revoked: str


class NameWarning(Lenient):
    """Created anyway, but the admin is told: `code` "confusable", the look-alikes."""

    code: str
    message: str
    similar_to: list[str] = Field(default_factory=list)


class UserOut(Lenient):
    username: str
    is_admin: bool = False
    created_at: Timestamp


class UserCreated(UserOut):
    warnings: list[NameWarning] = Field(default_factory=list)


class AgentKeyOut(Lenient):
    key_id: str
    prefix: str
    created_at: Timestamp
    revoked_at: Timestamp | None = None
    expires_at: Timestamp | None = None


class TaskerOut(Lenient):
    """A person who may set an agent to work: an owner, or a tasker an owner added."""

    name: str
    role: str  # owner | tasker
    added_by: str | None = None
    created_at: Timestamp | None = None


class MaxModeOut(Lenient):
    """The highest permission mode an agent's owners and its other taskers may start."""

    owners: str = "full"
    taskers: str = "workspace"


class AgentOut(Lenient):
    """An agent as its owners and admins see it (no secrets); `workspaces`: its
    workspace roots (globs, set by owners); `reported_workspaces`: what the agent
    last reported in its heartbeat; `connected_streams`: its open streams."""

    name: str
    owners: list[str] = Field(default_factory=list)
    workspaces: list[str] | None = None
    reported_workspaces: list[str] | None = None
    max_mode: MaxModeOut | None = None
    taskers: list[TaskerOut] = Field(default_factory=list)
    status: str | None = None
    platform: str | None = None
    version: str | None = None
    mode_enforcement: str | None = None
    #: What the bridge last reported about its sandbox (docs/sandbox.md):
    #: ``{state: proven|unavailable|off, reason}``; None when it never said.
    sandbox: dict[str, str | None] | None = None
    last_seen_at: Timestamp | None = None
    created_at: Timestamp
    keys: list[AgentKeyOut] = Field(default_factory=list)
    connected_streams: int = 0


class AgentCreated(Lenient):
    """A new agent and its key, shown only this once."""

    name: str
    key: str
    owners: list[str] = Field(default_factory=list)
    created_at: Timestamp
    warnings: list[NameWarning] = Field(default_factory=list)


class OwnerOut(Lenient):
    """A human who sees and adopts an agent's platform sessions."""

    username: str
    added_by: str | None = None
    created_at: Timestamp | None = None


class KeyRotated(Lenient):
    """A new agent key, shown only this once; the others end after `grace_s`."""

    name: str
    key: str
    grace_s: int


# -- agents ---------------------------------------------------------------------------


class HeartbeatOut(Lenient):
    """`unknown_fields` are echoed, never rejected; `mode_enforcement` is the level
    the gateway now records for this agent."""

    ok: bool
    unknown_fields: list[str] = Field(default_factory=list)
    mode_enforcement: str | None = None


class Marked(Lenient):
    """How many mails became read."""

    marked: int


# -- discovery -----------------------------------------------------------------------


class ParticipantOut(Lenient):
    """Someone in from/to/cc of a session's mails; `mails_sent` 0 = not yet spoken."""

    address: str
    name: str
    kind: str
    roles: list[str] = Field(default_factory=list)
    mails_sent: int = 0


class ContactOut(Lenient):
    """Someone the reader exchanged mail with; `unread`: the reader's unread mail from them."""

    name: str
    kind: str
    last_address: str
    last_mail_at: Timestamp | None = None
    unread: int = 0


class NameSuggestion(Lenient):
    name: str
    kind: str


class PathSuggestion(Lenient):
    """A workspace; `declared`: named by an agent, no session there yet."""

    path: str
    address: str | None = None
    last_mail_at: Timestamp | None = None
    declared: bool = False


class SessionSuggestion(Lenient):
    """A session alias, or (`adoptable`, no `session_id`) a platform session not adopted yet."""

    alias: str | None = None
    address: str | None = None
    session_id: str | None = None
    status: str | None = None
    last_mail_at: Timestamp | None = None
    adoptable: bool = False
    title: str | None = None


class Suggestions(Lenient):
    """Completions of a partial address `name@path.session`, part by part."""

    names: list[NameSuggestion] = Field(default_factory=list)
    paths: list[PathSuggestion] = Field(default_factory=list)
    sessions: list[SessionSuggestion] = Field(default_factory=list)


class SearchHit(MailOut):
    """A mail that matched, with `snippet`: the hits marked `**…**`."""

    snippet: str | None = None


# -- events --------------------------------------------------------------------------


class PermissionDecisionEvent(Lenient):
    """Data of `permission_decision`: a request was decided, expired or cancelled."""

    request_id: str
    relay_key: str | None = None
    session_id: str
    kind: str
    status: str
    decision: str | None = None
    note: str | None = None
    answers: list[str] | None = None
    decided_by: str | None = None
    decided_via: DecidedVia | None = None


class ResetEvent(Lenient):
    """Data of `reset`: the client's Last-Event-ID was ahead of the log
    (`ahead_of_log`: a restored backup) or below its compacted floor
    (`replay_window_exceeded`); either way, catch up from the inbox."""

    reason: str
    last_event_id: int
    head: int
    message: str


class WorkActionOut(Lenient):
    """A merge, discard, keep or push an owner asked for, and the bridge's answer
    (`status` pending | done | refused | failed; `conflicts`: paths of a refused
    merge); the data of a `work_action` event too (docs/review.md)."""

    id: str
    session_id: str
    agent: str
    action: str
    requested_by: str
    status: str
    message: str | None = None
    conflicts: list[str] = Field(default_factory=list)
    created_at: Timestamp
    finished_at: Timestamp | None = None


class EventFrame(Lenient):
    """One frame of an event stream (`text/event-stream`): the lines `id:`,
    `event:` and `data:` (JSON; its schema depends on `event`)."""

    id: int
    event: EventType
    data: (
        NewMailEvent
        | SessionOut
        | PermissionOut
        | PermissionDecisionEvent
        | WorkActionOut
        | ResetEvent
    )
