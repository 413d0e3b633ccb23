"""What a write returns, in domain terms (the API turns each into a status).

A relay key makes a send or a request idempotent: the second post with the same
key writes nothing and returns `Duplicate` with the id of the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from mailui4agents.domain.errors import Conflict
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.wire.models import Duplicate as DuplicateOut
from mailui4agents.wire.models import InboxItem, MailOut, PermissionOut


@dataclass(frozen=True)
class Sent:
    """A mail was stored and delivered; `item` is its MailOut for the sender as
    JSON (services/wire_shapes.mail_item, the bytes the API answers with:
    api/results.py), `mail` the same as a model, built only when asked."""

    item: JsonObject

    @cached_property
    def mail(self) -> MailOut:
        return InboxItem.model_validate(self.item)


@dataclass(frozen=True)
class Opened:
    """A permission request was opened (or decided at once by a grant)."""

    request: PermissionOut


@dataclass(frozen=True)
class Refused:
    """A permission request answered at once without opening one (the session's
    mode, nobody who could decide): `error` is the 409 to answer with once the
    transaction that recorded the answer (services/audit.py) has committed."""

    error: Conflict


@dataclass(frozen=True)
class Duplicate:
    """This relay key was used before by the same sender: nothing was written.
    `id` is the first mail's id (`mail_id`) or request's id (`request_id`)."""

    id: str
    id_field: str  # "mail_id" or "request_id", the field the answer names it by

    def body(self) -> DuplicateOut:
        return DuplicateOut.model_validate({"status": "duplicate_relay", self.id_field: self.id})
