"""The tables of people, agents, sessions, mail, requests and the calendar.
The tables of reaching people (devices, push, notification policy, e-mail) are
in db/reach_tables.py; db/schema.py gathers both. Row classes are named `…Row`;
they never leave services/."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailui4agents.db.base import Base, new_id
from mailui4agents.db.types import SerialId, UTCDateTime, utcnow


class UserRow(Base):
    __tablename__ = "users"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    username: Mapped[str] = mapped_column(String(200), unique=True)
    password_hash: Mapped[str] = mapped_column(Text)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class UserTokenRow(Base):
    __tablename__ = "user_tokens"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Login tokens end here (settings.login_token_ttl_s); NULL: until revoked.
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AgentRow(Base):
    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    workspaces: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[str | None] = mapped_column(String(50), nullable=True)
    platform: Mapped[str | None] = mapped_column(String(100), nullable=True)
    version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    mode_enforcement: Mapped[str] = mapped_column(String(20), default="advisory")
    # Where mail may set the agent to work (globs, domain/roots.py), set by its
    # owners; `workspaces` above is what the agent last reported (its heartbeat),
    # never a permission. Empty: nowhere (docs/access.md, "Who may set an agent to work").
    workspace_roots: Mapped[list[str]] = mapped_column(JSON, default=list)
    # The highest permission mode its owners / its other taskers may ask for.
    max_mode_owners: Mapped[str] = mapped_column(String(20), default="full")
    max_mode_taskers: Mapped[str] = mapped_column(String(20), default="workspace")
    heartbeat: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AgentKeyRow(Base):
    __tablename__ = "agent_keys"
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A key replaced by a rotation with a grace period works until then.
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SessionRow(Base):
    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("workspace", "alias"),
        Index("ix_sessions_created_by_created_at", "created_by", "created_at"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    alias: Mapped[str | None] = mapped_column(String(100), nullable=True)
    alias_manual: Mapped[bool] = mapped_column(Boolean, default=False)
    # An agent's suggestion; only a decider's acceptance makes it the alias.
    proposed_alias: Mapped[str | None] = mapped_column(String(100), nullable=True)
    proposed_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    workspace: Mapped[str] = mapped_column(Text, default="")
    # '["low","high","path"]' for the default session of that pair at that path
    # (services/sessions.default_session_key); NULL otherwise.
    default_key: Mapped[str | None] = mapped_column(Text, nullable=True, unique=True)
    status: Mapped[str] = mapped_column(String(20), default="active")
    permission_mode: Mapped[str] = mapped_column(String(20), default="workspace")
    permission_enforcement: Mapped[str] = mapped_column(String(20), default="advisory")
    # A person chose "own worktree" on the mail that made the session: its agent's
    # bridge runs it in a git worktree of its own (docs/review.md).
    worktree: Mapped[bool] = mapped_column(Boolean, default=False)
    platform_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    hop_limit: Mapped[int] = mapped_column(Integer, default=5)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_mail_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class MailRow(Base):
    __tablename__ = "mails"
    __table_args__ = (
        Index("ix_mails_session_id_seq", "session_id", "seq"),
        # The sessions a name sent mail in, from the index alone (access.sessions_of).
        Index("ix_mails_from_name_session_id", "from_name", "session_id"),
        # Relay keys are idempotency keys of one sender: another agent's key must
        # neither collide with nor reveal anything about this one's.
        UniqueConstraint("from_name", "relay_key"),
    )
    # seq orders mail (and pages lists); id is the public identifier.
    seq: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True, default=new_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    from_name: Mapped[str] = mapped_column(String(200))
    from_human: Mapped[bool] = mapped_column(Boolean)
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    parent_mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    type: Mapped[str] = mapped_column(String(30), default="message")
    relay: Mapped[bool] = mapped_column(Boolean, default=False)
    relay_key: Mapped[str | None] = mapped_column(String(160), nullable=True)
    from_session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RecipientRow(Base):
    """One row per recipient of a mail; it holds that reader's read state."""

    __tablename__ = "mail_recipients"
    __table_args__ = (
        UniqueConstraint("mail_seq", "name"),
        # A reader's inbox, newest first, walks one of these in order (no sort):
        # services/reading.inbox orders by mail_recipients.mail_seq (bench/scale.py).
        Index("ix_mail_recipients_name_mail_seq", "name", "mail_seq"),
        Index("ix_mail_recipients_name_read_at_mail_seq", "name", "read_at", "mail_seq"),
        # The sessions a name received mail in, from the index alone (access.sessions_of).
        Index("ix_mail_recipients_name_session_id", "name", "session_id"),
    )
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    mail_seq: Mapped[int] = mapped_column(ForeignKey("mails.seq", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    is_human: Mapped[bool] = mapped_column(Boolean)
    role: Mapped[str] = mapped_column(String(4))  # "to" | "cc"
    position: Mapped[int] = mapped_column(Integer)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The mail's session, copied (a mail never changes session): membership
    # without a look-up of every mail (migration 0012). Always written.
    session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)


class ReadLogRow(Base):
    """Every read of mail content: who, in which session scope, when."""

    __tablename__ = "read_log"
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    reader: Mapped[str] = mapped_column(String(200))
    reader_kind: Mapped[str] = mapped_column(String(10))
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    scope_session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    action: Mapped[str] = mapped_column(String(30))
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EventRow(Base):
    """The durable event log: one row per event per receiving principal."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_principal_id", "principal", "id"),)
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(220))  # "agent:claude" | "user:ana"
    type: Mapped[str] = mapped_column(String(40))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PermissionRow(Base):
    """A request by an agent to use a guarded tool (or to ask a question)."""

    __tablename__ = "permissions"
    __table_args__ = (
        Index("ix_permissions_session_id_status", "session_id", "status"),
        Index("ix_permissions_status_expires_at", "status", "expires_at"),
        UniqueConstraint("agent_name", "relay_key"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    agent_name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # approval | question
    tool_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tool_input: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    question: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    multi_select: Mapped[bool] = mapped_column(Boolean, default=False)
    relay_key: Mapped[str] = mapped_column(String(160))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    decision: Mapped[str | None] = mapped_column(String(20), nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    answers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    grant_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Where the decision came from (docs/remote.md, "First answer wins"):
    # web | api | cli | mcp | terminal | push | email | rule | grant | system.
    decided_channel: Mapped[str | None] = mapped_column(String(10), nullable=True)
    decided_device: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # Set by the conditional UPDATE that claims the reminder / the escalation
    # (services/notify_policy.py), so one replica sends each, once.
    reminded_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    escalated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class GrantRow(Base):
    """A standing "always allow" for one tool (optionally a command/path prefix)
    in one session. Stored here because every hook call is a separate process."""

    __tablename__ = "grants"
    __table_args__ = (Index("ix_grants_session_id_tool_name", "session_id", "tool_name"),)
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    tool_name: Mapped[str] = mapped_column(String(200))
    pattern: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What `pattern` means (domain/grants.py): "exact" (the one approved input),
    # "prefix" (a command or path prefix) or "every" (every input of the tool;
    # the pattern-less grants made before migration 0013, and pattern "*").
    scope: Mapped[str] = mapped_column(String(10), default="prefix")
    created_by: Mapped[str] = mapped_column(String(200))
    request_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class BlobRow(Base):
    """Content-addressed bytes on disk (data_dir/blobs/ab/<sha256>)."""

    __tablename__ = "blobs"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(SerialId)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AttachmentRow(Base):
    """An uploaded file: a name and type over a blob. Referenced by mails."""

    __tablename__ = "attachments"
    __table_args__ = (Index("ix_attachments_sha256", "sha256"),)
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    sha256: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"))
    name: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(200))
    size: Mapped[int] = mapped_column(SerialId)
    uploaded_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MailAttachmentRow(Base):
    __tablename__ = "mail_attachments"
    __table_args__ = (Index("ix_mail_attachments_attachment_id", "attachment_id"),)
    mail_seq: Mapped[int] = mapped_column(
        ForeignKey("mails.seq", ondelete="CASCADE"), primary_key=True
    )
    attachment_id: Mapped[str] = mapped_column(ForeignKey("attachments.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class PlatformSessionRow(Base):
    """A mirror of an agent platform's own sessions, from bridge heartbeats."""

    __tablename__ = "platform_sessions"
    __table_args__ = (UniqueConstraint("agent_name", "platform_id"),)
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    agent_name: Mapped[str] = mapped_column(String(200))
    platform_id: Mapped[str] = mapped_column(String(500))
    slug: Mapped[str | None] = mapped_column(String(200), nullable=True)
    title: Mapped[str | None] = mapped_column(Text, nullable=True)
    cwd: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    adopted_session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SessionDeciderRow(Base):
    """A human who may decide a session's requests and change its mode (docs/access.md).

    `owner`: a human on the session's first mail (its human sender, its human `to`
    recipients). `decider`: added explicitly by an owner. Being cc'd or posting
    into a session never puts anyone here."""

    __tablename__ = "session_deciders"
    __table_args__ = (Index("ix_session_deciders_name", "name"),)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    role: Mapped[str] = mapped_column(String(10))  # "owner" | "decider"
    added_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AgentOwnerRow(Base):
    """A human who owns an agent: sees and adopts its platform sessions."""

    __tablename__ = "agent_owners"
    __table_args__ = (Index("ix_agent_owners_username", "username"),)
    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    username: Mapped[str] = mapped_column(String(200), primary_key=True)
    added_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AgentTaskerRow(Base):
    """A human besides the agent's owners who may set it to work: start or
    continue a mail session with it (docs/access.md, "Who may set an agent to
    work"). Owners are taskers without a row here."""

    __tablename__ = "agent_taskers"
    __table_args__ = (Index("ix_agent_taskers_username", "username"),)
    agent_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    username: Mapped[str] = mapped_column(String(200), primary_key=True)
    added_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CalendarEntryRow(Base):
    """Mail to send later, once or by an RRULE (docs/behaviour.md#calendar).

    `next_due` is the next occurrence not yet delivered (UTC; NULL when none is
    left). The scheduler claims an occurrence with a conditional UPDATE on
    (id, status, next_due) in the transaction that delivers it, so one occurrence
    is delivered once whatever the number of gateway processes."""

    __tablename__ = "calendar_entries"
    __table_args__ = (
        Index("ix_calendar_entries_status_next_due", "status", "next_due"),
        Index("ix_calendar_entries_created_by_status", "created_by", "status"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    created_by: Mapped[str] = mapped_column(String(200))
    creator_kind: Mapped[str] = mapped_column(String(10))  # "user" | "agent"
    to: Mapped[list[str]] = mapped_column(JSON, default=list)
    cc: Mapped[list[str]] = mapped_column(JSON, default=list)
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    from_session_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    permission_mode: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # Wall-clock start in `timezone`, ISO 8601 without offset ("2026-03-27T09:00:00").
    start_local: Mapped[str] = mapped_column(String(32))
    timezone: Mapped[str] = mapped_column(String(64))
    rrule: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="scheduled")
    next_due: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    delivered: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CalendarAttachmentRow(Base):
    """An attachment a calendar entry will send: a reference for the blob sweep."""

    __tablename__ = "calendar_attachments"
    __table_args__ = (Index("ix_calendar_attachments_attachment_id", "attachment_id"),)
    entry_id: Mapped[str] = mapped_column(
        ForeignKey("calendar_entries.id", ondelete="CASCADE"), primary_key=True
    )
    attachment_id: Mapped[str] = mapped_column(ForeignKey("attachments.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class CalendarOccurrenceRow(Base):
    """One delivered (or failed) occurrence. Unique per (entry, due time): a second
    guard, besides the conditional claim, against delivering an occurrence twice."""

    __tablename__ = "calendar_occurrences"
    __table_args__ = (UniqueConstraint("entry_id", "due_at"),)
    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    entry_id: Mapped[str] = mapped_column(ForeignKey("calendar_entries.id", ondelete="CASCADE"))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime] = mapped_column(UTCDateTime)
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
