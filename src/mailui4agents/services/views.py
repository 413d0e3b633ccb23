"""How mail and sessions look on the wire.

`delivery_fields` is the ONE definition of what a `new_mail` event carries. Every
mail shape a client can see (inbox rows, read, thread) is built on top of it, so
catch-up delivery can rebuild the live event from any row and the two can never
drift apart (a missing field once turned a full-mode session into workspace mode).

What a service returns (docs/design.md, "Typed results"): the wire model itself
when the value IS what a client receives (these builders: InboxItem, SessionOut,
AttachmentRef...), a frozen dataclass (domain/results.py) when it is an outcome the
API still turns into a status (`Sent | Duplicate`). A stored event's payload is
the model as JSON (`wire.models.to_json`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mailui4agents.db.tables import AttachmentRow, MailRow, RecipientRow, SessionRow
from mailui4agents.domain.addresses import format_parts
from mailui4agents.wire.models import (
    AttachmentRef,
    InboxItem,
    JsonObject,
    NewMailEvent,
    SessionOut,
    rfc3339,
)

NEW_MAIL_FIELDS = (
    "mail_id",
    "session_id",
    "session_alias",
    "workspace",
    "type",
    "from",
    "from_human",
    "to",
    "cc",
    "subject",
    "in_reply_to",
    "reply_address",
    "self_address",
    "permission_mode",
    "permission_enforcement",
    "platform_session_id",
    "created_at",
)


@dataclass
class MailContext:
    """A mail with what is needed to show it: session, recipients, attachments."""

    mail: MailRow
    session: SessionRow
    recipients: list[RecipientRow]
    attachments: list[AttachmentRow] = field(default_factory=list)
    # Each recipient's event lists every recipient: without these caches a mail
    # to 100 formatted 10,000 addresses inside the write transaction.
    _addresses: dict[str, str] = field(default_factory=dict, repr=False)
    _names: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def address_of(self, name: str) -> str:
        found = self._addresses.get(name)
        if found is None:
            found = self._addresses[name] = session_address(self.session, name)
        return found

    def names(self, role: str) -> list[str]:
        if role not in self._names:
            rows = sorted((r for r in self.recipients if r.role == role), key=lambda r: r.position)
            self._names[role] = [r.name for r in rows]
        return list(self._names[role])

    def recipient(self, name: str) -> RecipientRow | None:
        return next((r for r in self.recipients if r.name == name), None)


def session_address(session: SessionRow, name: str) -> str:
    """`name@workspace.alias`: how `name` is reached in this session."""
    return format_parts(name, session.workspace, session.alias)


def reply_name(reader: str, sender: str, to: Sequence[str]) -> str:
    """Whom `reader`'s reply goes to: the sender, or, in the sender's own copy,
    whoever it was sent to (the first of `to`)."""
    if reader == sender:
        return to[0] if to else sender
    return sender


def cut_body(body: str, body_limit: int | None) -> tuple[str, bool]:
    """The body as shown under `body_limit`, and whether it was cut. None or 0
    means the whole body: 0 once rendered as an empty body and an agent never
    saw its task's last requirement."""
    if body_limit and len(body) > body_limit:
        return body[:body_limit], True
    return body, False


def _delivery(ctx: MailContext, reader: str) -> dict[str, object]:
    mail, session = ctx.mail, ctx.session
    to = ctx.names("to")
    reply_to = reply_name(reader, mail.from_name, to)
    fields: dict[str, object] = {
        "mail_id": mail.id,
        "session_id": session.id,
        "session_alias": session.alias,
        "workspace": session.workspace,
        "type": mail.type,
        "from": ctx.address_of(mail.from_name),
        "from_human": mail.from_human,
        "to": [ctx.address_of(n) for n in to],
        "cc": [ctx.address_of(n) for n in ctx.names("cc")],
        "subject": mail.subject,
        "in_reply_to": mail.parent_mail_id,
        "reply_address": ctx.address_of(reply_to),
        "self_address": ctx.address_of(reader),
        "permission_mode": session.permission_mode,
        "permission_enforcement": session.permission_enforcement,
        "platform_session_id": session.platform_id,
        "created_at": mail.created_at,
    }
    assert tuple(fields) == NEW_MAIL_FIELDS
    return fields


def delivery_fields(ctx: MailContext, reader: str) -> NewMailEvent:
    """The `new_mail` event for `reader`, and the core of every mail shape."""
    return NewMailEvent.model_validate(_delivery(ctx, reader))


def mail_out(ctx: MailContext, reader: str, body_limit: int | None = None) -> InboxItem:
    """MailOut (= InboxItem): the delivery fields plus body and read state, the
    body under `body_limit` (cut_body)."""
    mail = ctx.mail
    body, truncated = cut_body(mail.body, body_limit)
    rec = ctx.recipient(reader)
    return InboxItem.model_validate(
        {
            "id": mail.id,
            **_delivery(ctx, reader),
            "from_name": mail.from_name,
            "body": body,
            "body_truncated": truncated,
            "parent_mail_id": mail.parent_mail_id,
            "attachments": [attachment_out(a) for a in ctx.attachments],
            "relay": mail.relay,
            "read": True if rec is None else rec.read_at is not None,
        }
    )


# -- pages of mail (inbox, mailbox, thread) ------------------------------------------
#
# A page of 50 built as above cost more than its SQL: ORM rows, 50 InboxItem
# validations, then FastAPI validating the whole page again before encoding it
# (bench/server.py). A page is built here from plain rows straight into the
# JSON objects `mail_out` + `to_json` give, key for key and in the same order
# (tests/api/test_listing_bytes.py compares the bytes), and sent as they are.

PAGE_MAIL_COLUMNS = (
    "seq",
    "id",
    "session_id",
    "from_name",
    "from_human",
    "subject",
    "body",
    "parent_mail_id",
    "type",
    "relay",
    "created_at",
    "alias",
    "workspace",
    "permission_mode",
    "permission_enforcement",
    "platform_id",
    "recipients",
    "has_files",
)
"""The columns of a page's mail rows, in order (services/reading.py selects them)."""
BODY_AT = PAGE_MAIL_COLUMNS.index("body")
TYPE_AT = PAGE_MAIL_COLUMNS.index("type")
RECIPIENTS_AT = PAGE_MAIL_COLUMNS.index("recipients")
HAS_FILES_AT = PAGE_MAIL_COLUMNS.index("has_files")


@dataclass(slots=True)
class People:
    """One mail's recipients (names by role, in order), the unread copies'
    recipient rows, and its attachments as the wire lists them."""

    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    unread: dict[str, int] = field(default_factory=dict)  # name -> recipient row id
    attachments: list[JsonObject] = field(default_factory=list)


def page_people(
    rows: Iterable[Sequence[Any]], files: dict[int, list[JsonObject]]
) -> dict[int, People]:
    """Each page row's people, by mail seq: its recipients from the row's
    `recipients` column (lines of `role position unread-row-id-or-dash name`,
    services/reading._recipients_of_mail) in position order, and its attachments
    from `files` (by seq, as attachments.refs_for_mails gives them)."""
    out: dict[int, People] = {}
    for row in rows:
        p = out[row[0]] = People()
        text = row[RECIPIENTS_AT]
        if not text:
            continue
        entries = [line.split(" ", 3) for line in text.split("\n")]
        entries.sort(key=lambda e: int(e[1]))
        for role, _position, unread, name in entries:
            (p.to if role == "to" else p.cc).append(name)
            if unread != "-":
                p.unread[name] = int(unread)
    for seq, refs in files.items():
        out[seq].attachments = refs
    return out


class _Addresses:
    """`session_address` of one session, each name formatted once per page."""

    __slots__ = ("alias", "found", "workspace")

    def __init__(self, workspace: str, alias: str | None) -> None:
        self.workspace, self.alias = workspace, alias
        self.found: dict[str, str] = {}

    def of(self, name: str) -> str:
        found = self.found.get(name)
        if found is None:
            found = self.found[name] = format_parts(name, self.workspace, self.alias)
        return found


def page_items(
    rows: Sequence[Sequence[Any]],
    people: dict[int, People],
    reader: str,
    body_limit: int | None = None,
) -> list[JsonObject]:
    """The JSON objects of a page, each what `to_json(mail_out(ctx, reader,
    body_limit))` gives for that mail. `rows`: PAGE_MAIL_COLUMNS; a body may come
    cut to body_limit + 1 characters already (enough to tell it was longer)."""
    books: dict[str, _Addresses] = {}  # per session
    items = []
    for (
        seq,
        mail_id,
        session_id,
        sender,
        from_human,
        subject,
        body,
        parent,
        type_,
        relay,
        created_at,
        alias,
        workspace,
        mode,
        enforcement,
        platform_id,
        _recipients,
        _has_files,
    ) in rows:
        book = books.get(session_id)
        if book is None:
            book = books[session_id] = _Addresses(workspace, alias)
        address = book.of
        p = people[seq]
        reply_to = reply_name(reader, sender, p.to)
        body, truncated = cut_body(body, body_limit)
        items.append(
            {
                "id": mail_id,
                "session_id": session_id,
                "session_alias": alias,
                "workspace": workspace,
                "type": type_,
                "from": address(sender),
                "from_human": bool(from_human),
                "to": [address(n) for n in p.to],
                "cc": [address(n) for n in p.cc],
                "subject": subject,
                "body": body,
                "body_truncated": truncated,
                "parent_mail_id": parent,
                "attachments": p.attachments,
                "relay": bool(relay),
                "created_at": rfc3339(created_at),
                "read": reader not in p.unread,
                "reply_address": address(reply_to),
                "self_address": address(reader),
                "mail_id": mail_id,
                "in_reply_to": parent,
                "permission_mode": mode,
                "permission_enforcement": enforcement,
                "platform_session_id": platform_id,
                "from_name": sender,
            }
        )
    return items


def attachment_out(att: AttachmentRow) -> AttachmentRef:
    """An attachment as an upload answers it and as a mail lists it."""
    return AttachmentRef(
        attachment_id=att.id,
        name=att.name,
        size=att.size,
        content_type=att.content_type,
        sha256=att.sha256,
    )


def session_out(
    session: SessionRow,
    participants: list[str],
    unread: int,
    pending: int = 0,
    deciders: list[str] | None = None,
) -> SessionOut:
    return SessionOut(
        id=session.id,
        alias=session.alias,
        workspace=session.workspace,
        status=session.status,
        permission_mode=session.permission_mode,
        permission_enforcement=session.permission_enforcement,
        platform_id=session.platform_id,
        hop_limit=session.hop_limit,
        participants=participants,
        deciders=deciders or [],
        created_at=session.created_at,
        last_mail_at=session.last_mail_at,
        unread=unread,
        pending_permissions=pending,
        proposed_alias=session.proposed_alias,
        proposed_by=session.proposed_by,
    )
