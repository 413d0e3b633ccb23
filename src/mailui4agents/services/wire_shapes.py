"""How mail and sessions look on the wire.

ONE builder makes a mail as the wire shows it: `mail_item`, from one row of
PAGE_MAIL_COLUMNS and its People. Everything else is built on it:
- a page (inbox, mailbox, thread, search) is `page_items`, `mail_item` per row;
- a single mail (`mail_out`: send, read) is a page of one: its ORM rows are
  turned into a page row and the item validated as InboxItem;
- the `new_mail` event (`delivery_fields`) is a projection of that item: every
  field but the mail-only ones (wire.models.MAIL_ONLY_FIELDS), so catch-up
  delivery can rebuild the live event from any row and the two never drift apart
  (a missing field once turned a full-mode session into workspace mode).

How to add a mail field (CONTRIBUTING.md, "Adding a mail field"): one edit here,
its value in `mail_item` (at the place of its key in MailOut's order), and one
in wire/models.py, the field on MailOut (and, when a page must select it, its
column in PAGE_MAIL_COLUMNS and services/reading.page_columns). The page, the
single mail and the `new_mail` event then all carry it; declare it on
NewMailEvent too only for typed access to it on events, or put it in
MAIL_ONLY_FIELDS if the event must not carry it (tests/services/test_mail_builder.py).

What a service returns (docs/design.md, "Typed results"): the wire model itself
when the value IS what a client receives (these builders: InboxItem, SessionOut,
AttachmentRef...), a frozen dataclass (domain/results.py) when it is an outcome the
API still turns into a status (`Sent | Duplicate`). A stored event's payload is
the model as JSON (`wire.models.to_json`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mailui4agents.db.tables import AttachmentRow, MailRow, RecipientRow, SessionRow
from mailui4agents.domain.addresses import format_parts
from mailui4agents.domain.times import rfc3339
from mailui4agents.wire.models import (
    MAIL_ONLY_FIELDS,
    AttachmentRef,
    InboxItem,
    JsonObject,
    MailOut,
    NewMailEvent,
    SessionOut,
    to_json,
)

NEW_MAIL_FIELDS = tuple(
    key
    for key in (f.alias or name for name, f in MailOut.model_fields.items())
    if key not in MAIL_ONLY_FIELDS
)
"""What a `new_mail` event carries: a mail's fields but the mail-only ones, derived
from the wire model (not a second list of fields)."""


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


# -- the builder ----------------------------------------------------------------------
#
# A page of 50 built through ORM rows and 50 InboxItem validations cost more than
# its SQL, then FastAPI validated the whole page again before encoding it
# (bench/server.py). So the one builder works on plain rows and gives the JSON
# objects themselves, key for key in MailOut's order (tests/api/test_listing_bytes.py
# compares the bytes with the model path), and a page is sent as it is.

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
    "worktree",
    "recipients",
    "has_files",
)
"""The columns of a page's mail rows, in order (services/reading.py selects them)."""
BODY_AT = PAGE_MAIL_COLUMNS.index("body")
TYPE_AT = PAGE_MAIL_COLUMNS.index("type")
SESSION_AT = PAGE_MAIL_COLUMNS.index("session_id")
ALIAS_AT = PAGE_MAIL_COLUMNS.index("alias")
WORKSPACE_AT = PAGE_MAIL_COLUMNS.index("workspace")
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


def mail_item(
    row: Sequence[Any],
    people: People,
    reader: str,
    body_limit: int | None,
    address: Callable[[str], str],
) -> JsonObject:
    """THE mail as the wire shows it to `reader`: the JSON object of MailOut, key
    for key in its order. `row`: PAGE_MAIL_COLUMNS (a body may come cut to
    body_limit + 1 characters already: enough to tell it was longer);
    `address`: a name's address in the row's session (session_address)."""
    (
        _seq,
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
        worktree,
        _recipients,
        _has_files,
    ) = row
    body, truncated = cut_body(body, body_limit)
    return {
        "id": mail_id,
        "session_id": session_id,
        "session_alias": alias,
        "workspace": workspace,
        "type": type_,
        "from": address(sender),
        "from_human": bool(from_human),
        "to": [address(n) for n in people.to],
        "cc": [address(n) for n in people.cc],
        "subject": subject,
        "body": body,
        "body_truncated": truncated,
        "parent_mail_id": parent,
        "attachments": people.attachments,
        "relay": bool(relay),
        "created_at": rfc3339(created_at),
        "read": reader not in people.unread,
        "reply_address": address(reply_name(reader, sender, people.to)),
        "self_address": address(reader),
        "mail_id": mail_id,
        "in_reply_to": parent,
        "permission_mode": mode,
        "permission_enforcement": enforcement,
        "platform_session_id": platform_id,
        "worktree": bool(worktree),
        "from_name": sender,
    }


def new_mail_data(item: JsonObject) -> JsonObject:
    """A mail item's `new_mail` event data: the item but its mail-only fields."""
    return {k: v for k, v in item.items() if k not in MAIL_ONLY_FIELDS}


class _Addresses:
    """`session_address` of one session, each name formatted once."""

    __slots__ = ("alias", "found", "workspace")

    def __init__(self, workspace: str, alias: str | None) -> None:
        self.workspace, self.alias = workspace, alias
        self.found: dict[str, str] = {}

    def of(self, name: str) -> str:
        found = self.found.get(name)
        if found is None:
            found = self.found[name] = format_parts(name, self.workspace, self.alias)
        return found


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


def page_items(
    rows: Sequence[Sequence[Any]],
    people: dict[int, People],
    reader: str,
    body_limit: int | None = None,
) -> list[JsonObject]:
    """The JSON objects of a page: `mail_item` of each row (PAGE_MAIL_COLUMNS),
    each session's addresses formatted once for the page."""
    books: dict[str, _Addresses] = {}  # per session
    items = []
    for row in rows:
        session_id = row[SESSION_AT]
        book = books.get(session_id)
        if book is None:
            book = books[session_id] = _Addresses(row[WORKSPACE_AT], row[ALIAS_AT])
        items.append(mail_item(row, people[row[0]], reader, body_limit, book.of))
    return items


# -- a mail of ORM rows: a page of one ------------------------------------------------


@dataclass
class MailContext:
    """A mail with what is needed to show it: session, recipients, attachments."""

    mail: MailRow
    session: SessionRow
    recipients: list[RecipientRow]
    attachments: list[AttachmentRow] = field(default_factory=list)
    # Each recipient's event lists every recipient: without these caches a mail
    # to 100 formatted 10,000 addresses inside the write transaction.
    _book: _Addresses | None = field(default=None, repr=False)
    _names: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _page: tuple[tuple[Any, ...], People] | None = field(default=None, repr=False)

    def address_of(self, name: str) -> str:
        if self._book is None:
            self._book = _Addresses(self.session.workspace, self.session.alias)
        return self._book.of(name)

    def names(self, role: str) -> list[str]:
        if role not in self._names:
            rows = sorted((r for r in self.recipients if r.role == role), key=lambda r: r.position)
            self._names[role] = [r.name for r in rows]
        return list(self._names[role])

    def recipient(self, name: str) -> RecipientRow | None:
        return next((r for r in self.recipients if r.name == name), None)

    def page_row(self) -> tuple[tuple[Any, ...], People]:
        """The mail as a page row (PAGE_MAIL_COLUMNS) and its People."""
        if self._page is None:
            m, ses = self.mail, self.session
            row = (
                m.seq, m.id, m.session_id, m.from_name, m.from_human, m.subject, m.body,
                m.parent_mail_id, m.type, m.relay, m.created_at, ses.alias, ses.workspace,
                ses.permission_mode, ses.permission_enforcement, ses.platform_id,
                ses.worktree, None, bool(self.attachments),
            )  # fmt: skip
            people = People(
                to=self.names("to"),
                cc=self.names("cc"),
                # The row id only matters to mark a page read; a row just
                # written has none here (services/delivery.py reads nothing back).
                unread={r.name: r.id or 0 for r in self.recipients if r.read_at is None},
                attachments=[to_json(attachment_out(a)) for a in self.attachments],
            )
            self._page = row, people
        return self._page

    def item(self, reader: str, body_limit: int | None = None) -> JsonObject:
        """`mail_item` of this mail for `reader`."""
        row, people = self.page_row()
        return mail_item(row, people, reader, body_limit, self.address_of)


def delivery_fields(ctx: MailContext, reader: str) -> NewMailEvent:
    """The `new_mail` event for `reader`: the projection of the mail item."""
    return NewMailEvent.model_validate(new_mail_data(ctx.item(reader)))


def mail_out(ctx: MailContext, reader: str, body_limit: int | None = None) -> InboxItem:
    """MailOut (= InboxItem) of one mail: a page of one (`mail_item`), the body
    under `body_limit` (cut_body)."""
    return InboxItem.model_validate(ctx.item(reader, body_limit))


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
        worktree=bool(session.worktree),
    )
