"""Response models of the gateway API (docs/api.md, "Shapes" and "Events").

The shapes are defined once, in mailui4agents.wire, and used by the gateway too.
They are lenient on purpose: unknown fields are kept (``extra="allow"``) so an
older client keeps working against a newer gateway. Requests stay strict on the
gateway side; these models never produce request bodies.
"""

from __future__ import annotations

from mailui4agents.domain.json_types import JsonObject
from mailui4agents.wire import models as wire
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import (
    AttachmentRef,
    DeciderOut,
    GrantOut,
    MailOut,
    NewMailEvent,
    Page,
    PermissionOut,
    SessionOut,
)

__all__ = [
    "AttachmentRef",
    "DeciderOut",
    "Event",
    "EventType",
    "GrantOut",
    "InboxItem",
    "MailOut",
    "NewMailEvent",
    "Page",
    "PermissionOut",
    "SessionOut",
]

_Lenient = wire.Lenient


class InboxItem(wire.InboxItem):
    """An inbox row: a MailOut plus every field ``new_mail`` carries.

    Catch-up after a restart rebuilds the live event from this row with
    :meth:`to_new_mail_event`, so both paths see the same fields.
    """

    def to_new_mail_event(self) -> NewMailEvent:
        """The ``new_mail`` event this row stands for."""
        row = self.model_dump(by_alias=True)
        row["mail_id"] = self.mail_id or self.id
        if row.get("in_reply_to") is None:
            row["in_reply_to"] = self.parent_mail_id
        # The gateway's own projection (services/wire_shapes.new_mail_data): the mail
        # but its mail-only fields, those of a newer gateway included.
        return NewMailEvent.model_validate(
            {key: value for key, value in row.items() if key not in wire.MAIL_ONLY_FIELDS}
        )


class Event(_Lenient):
    """One live event from an SSE stream; ``data`` is the decoded JSON payload."""

    id: int | None
    type: str
    data: JsonObject

    def new_mail(self) -> NewMailEvent:
        """The payload of a ``new_mail`` event as a typed model."""
        if self.type != EventType.NEW_MAIL:
            raise ValueError(f"event {self.id} is {self.type!r}, not 'new_mail'")
        return NewMailEvent.model_validate(self.data)
