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

T = TypeVar("T")


def _rfc3339(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


Timestamp = Annotated[datetime, PlainSerializer(_rfc3339, return_type=str, when_used="json")]


class Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AttachmentRef(Lenient):
    """An attachment as listed on a mail (and as an upload answers it)."""

    attachment_id: str
    name: str
    size: int
    content_type: str | None = None
    sha256: str | None = None


class NewMailEvent(Lenient):
    """Data of a `new_mail` event: the delivery fields every mail shape starts with."""

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


class InboxItem(MailOut):
    """An inbox row: a MailOut plus every field `new_mail` carries."""

    mail_id: str | None = None
    in_reply_to: str | None = None
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_session_id: str | None = None


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


class PermissionOut(Lenient):
    """A permission request (an approval or a question) and its outcome."""

    id: str
    session_id: str
    kind: str
    agent: str
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    summary: str | None = None
    question: str | None = None
    options: list[dict[str, Any]] | None = None
    multi_select: bool = False
    status: str
    decision: str | None = None
    note: str | None = None
    answers: list[str] | None = None
    decided_by: str | None = None
    decided_at: Timestamp | None = None
    expires_at: Timestamp | None = None
    relay_key: str | None = None
    mail_id: str | None = None
    grant_id: str | None = None
    created_at: Timestamp


class GrantOut(Lenient):
    """A standing approval: `tool_name` calls matching `pattern` in a session."""

    id: str
    session_id: str
    tool_name: str
    pattern: str | None = None
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
