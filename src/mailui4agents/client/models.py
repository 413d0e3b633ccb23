"""Response models of the gateway API (see API.md, "Shapes" and "Events").

The models are lenient on purpose: unknown fields are kept (``extra="allow"``)
so an older client keeps working against a newer gateway. Requests stay strict
on the gateway side; these models never produce request bodies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AttachmentRef(_Lenient):
    """An attachment as listed on a mail."""

    attachment_id: str
    name: str
    size: int
    content_type: str | None = None
    sha256: str | None = None


class MailOut(_Lenient):
    """A mail as the gateway returns it. ``from`` is ``from_`` in Python."""

    id: str
    session_id: str
    session_alias: str | None = None
    workspace: str | None = None
    type: str
    from_: str = Field(alias="from")
    from_human: bool = False  # missing counts as agent (SPEC §6)
    to: list[str]
    cc: list[str] = Field(default_factory=list)
    subject: str
    body: str = ""
    body_truncated: bool = False
    parent_mail_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    relay: bool = False
    created_at: datetime
    read: bool = False
    reply_address: str | None = None
    self_address: str | None = None


class NewMailEvent(_Lenient):
    """Data of a ``new_mail`` event."""

    mail_id: str
    session_id: str
    session_alias: str | None = None
    workspace: str | None = None
    type: str
    from_: str = Field(alias="from")
    from_human: bool = False
    to: list[str]
    cc: list[str] = Field(default_factory=list)
    subject: str
    in_reply_to: str | None = None
    reply_address: str | None = None
    self_address: str | None = None
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_session_id: str | None = None
    created_at: datetime


class InboxItem(MailOut):
    """An inbox row: a MailOut plus every field ``new_mail`` carries.

    Catch-up after a restart rebuilds the live event from this row with
    :meth:`to_new_mail_event`, so both paths see the same fields.
    """

    mail_id: str | None = None
    in_reply_to: str | None = None
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_session_id: str | None = None

    def to_new_mail_event(self) -> NewMailEvent:
        """The ``new_mail`` event this row stands for."""
        row = self.model_dump(by_alias=True)
        row["mail_id"] = self.mail_id or self.id
        if row.get("in_reply_to") is None:
            row["in_reply_to"] = self.parent_mail_id
        keys = (field.alias or name for name, field in NewMailEvent.model_fields.items())
        return NewMailEvent.model_validate({key: row.get(key) for key in keys})


class SessionOut(_Lenient):
    """A session (a thread) as the gateway returns it."""

    id: str
    alias: str | None = None
    workspace: str | None = None
    status: str
    permission_mode: str | None = None
    permission_enforcement: str | None = None
    platform_id: str | None = None
    hop_limit: int | None = None
    participants: list[Any] = Field(default_factory=list)
    created_at: datetime
    last_mail_at: datetime | None = None
    unread: int = 0
    pending_permissions: int = 0


class Page(_Lenient, Generic[T]):
    """One page of a list endpoint; ``next_cursor`` is None on the last page."""

    items: list[T]
    next_cursor: str | None = None


class Event(_Lenient):
    """One live event from an SSE stream; ``data`` is the decoded JSON payload."""

    id: int | None
    type: str
    data: dict[str, Any]

    def new_mail(self) -> NewMailEvent:
        """The payload of a ``new_mail`` event as a typed model."""
        if self.type != "new_mail":
            raise ValueError(f"event {self.id} is {self.type!r}, not 'new_mail'")
        return NewMailEvent.model_validate(self.data)
