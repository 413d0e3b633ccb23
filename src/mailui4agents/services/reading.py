"""Reading mail: pages of mail (inbox, mailbox, thread, and search's hits:
services/search.py), one mail, marking mail read, and the read log every read
writes (docs/access.md). Sending is services/mail.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    Integer,
    Select,
    String,
    bindparam,
    case,
    func,
    insert,
    select,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import MailAttachmentRow, MailRow, ReadLogRow, RecipientRow, SessionRow
from mailui4agents.db.types import SerialId, utcnow
from mailui4agents.domain.errors import Missing, invalid_value, not_found
from mailui4agents.services import access, attachments, request_input
from mailui4agents.services.mail import contexts
from mailui4agents.services.principals import Principal
from mailui4agents.services.wire_shapes import (
    HAS_FILES_AT,
    PAGE_MAIL_COLUMNS,
    TYPE_AT,
    MailContext,
    page_items,
    page_people,
)
from mailui4agents.wire.models import JsonObject

# A page statement's bind parameters: names, ids and patterns, cursors and sizes.
BindParams = dict[str, str | int]

# Core statements on the tables (no ORM bulk path, built once): the read log's
# rows, one INSERT … SELECT per read (_page_read_log); a page's read state, one UPDATE.
_READ_LOG = insert(ReadLogRow.__table__)  # type: ignore[arg-type]
_MARK_READ = (
    update(RecipientRow.__table__)  # type: ignore[arg-type]
    .where(RecipientRow.__table__.c.id.in_(bindparam("ids", expanding=True)))
    .values(read_at=bindparam("now"))
)


async def record_reads(
    s: AsyncSession,
    reader: Principal,
    seqs: Sequence[int],
    scope_session_id: str | None,
    action: str,
    at: datetime | None = None,
    newest_first: bool = False,
) -> None:
    """Every read is recorded, so an out-of-scope read can be told from a normal
    one: a row per mail `seqs` names, in one statement (_page_read_log)."""
    if not seqs:
        return
    log = {
        "log_reader": reader.name,
        "log_kind": reader.kind,
        "log_scope": scope_session_id,
        "log_action": action,
        "log_at": at or utcnow(),
        "seqs": list(seqs),
    }
    await s.execute(_page_read_log(newest_first), log)


def parse_cursor(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        after = int(value)
    except ValueError:
        after = -1
    # A mail seq: 64 bits on both databases (bound as SerialId: Integer was int4 on
    # PostgreSQL, and a cursor past 2^31 a 500 there); larger ones were 500s too.
    if not 0 <= after < 2**63:
        raise invalid_value("cursor", "cursor is not one this server gave out")
    return after


# -- pages: inbox, mailbox, thread (services/wire_shapes.page_items builds them) -----------
#
# A page is two statements on the writer whatever its length: the mails with
# their sessions and, in a column of each row, their recipients (Core columns,
# no ORM objects), then the read log (one INSERT … SELECT); a SELECT more for
# the attachments when some mail has any (attachments.refs_for_mails); a thread
# adds the anchor's look-up with the read rule in it. The statements are built
# once per shape (below) and only their parameters change.


@cache
def page_columns(*, preview: bool) -> tuple[Any, ...]:
    """PAGE_MAIL_COLUMNS of MailRow joined to SessionRow (a page's SELECT list),
    built once: search adds to it on each request (its statement varies)."""
    body: Any = MailRow.body
    if preview:  # enough to tell a longer body: a preview never carries a 1 MB body
        body = func.substr(MailRow.body, 1, bindparam("body_chars", type_=Integer))
    cols = {
        "seq": MailRow.seq,
        "id": MailRow.id,
        "session_id": MailRow.session_id,
        "from_name": MailRow.from_name,
        "from_human": MailRow.from_human,
        "subject": MailRow.subject,
        "body": body.label("body"),
        "parent_mail_id": MailRow.parent_mail_id,
        "type": MailRow.type,
        "relay": MailRow.relay,
        "created_at": MailRow.created_at,
        "alias": SessionRow.alias,
        "workspace": SessionRow.workspace,
        "permission_mode": SessionRow.permission_mode,
        "permission_enforcement": SessionRow.permission_enforcement,
        "platform_id": SessionRow.platform_id,
        "worktree": SessionRow.worktree,
        "recipients": _recipients_of_mail(),
        "has_files": select(MailAttachmentRow.mail_seq)
        .where(MailAttachmentRow.mail_seq == MailRow.seq)
        .exists()
        .label("has_files"),
    }
    assert tuple(cols) == PAGE_MAIL_COLUMNS
    return tuple(cols.values())


_RECIPIENTS = RecipientRow.__table__.alias()  # never the outer query's (an inbox's own row)


def _recipients_of_mail() -> Any:
    """A mail's recipients in one text column of the mail's row, one line each:
    `role position unread-row-id-or-dash name` (wire_shapes.page_people reads it;
    names hold no whitespace, domain/names.py). One statement fewer per page
    than reading them apart; the aggregate's order is not defined, the position
    orders them."""
    r = _RECIPIENTS.c
    unread = case((r.read_at.is_(None), sql_cast(r.id, String)), else_="-")
    entry = r.role + " " + sql_cast(r.position, String) + " " + unread + " " + r.name
    return (
        select(func.aggregate_strings(entry, "\n"))
        .where(r.mail_seq == MailRow.seq)
        .scalar_subquery()
        .label("recipients")
    )


def _like(text: str) -> str:
    """`contains(text, autoescape=True)` as a bound pattern (escape '/')."""
    escaped = text.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return f"%{escaped}%"


@cache
def _inbox_stmt(
    unread: bool, in_session: bool, query: bool, after: bool, newest_first: bool, preview: bool
) -> Select[Any]:
    # Keyset pagination on the recipient row's mail_seq (equal to mails.seq): its
    # index gives the page in order; ordering by mails.seq made SQLite sort every
    # mail of the reader for each page (EXPLAIN QUERY PLAN in bench/scale.py).
    order = RecipientRow.mail_seq
    stmt = (
        select(*page_columns(preview=preview))
        .select_from(RecipientRow)
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .join(SessionRow, SessionRow.id == MailRow.session_id)
        .where(RecipientRow.name == bindparam("reader"))
    )
    if unread:
        stmt = stmt.where(RecipientRow.read_at.is_(None))
    if in_session:
        stmt = stmt.where(MailRow.session_id == bindparam("session_id"))
    if query:
        pattern: Any = bindparam("pattern")
        stmt = stmt.where(
            MailRow.subject.like(pattern, escape="/") | MailRow.body.like(pattern, escape="/")
        )
    if after:
        cursor = bindparam("after", type_=SerialId)
        stmt = stmt.where(order < cursor if newest_first else order > cursor)
    order_by = order.desc() if newest_first else order
    return stmt.order_by(order_by).limit(bindparam("limit", type_=Integer))


@cache
def _thread_stmt(after: bool) -> Select[Any]:
    stmt = (
        select(*page_columns(preview=False))
        .join(SessionRow, SessionRow.id == MailRow.session_id)
        .where(MailRow.session_id == bindparam("session_id"))
    )
    if after:
        stmt = stmt.where(MailRow.seq > bindparam("after", type_=SerialId))
    return stmt.order_by(MailRow.seq).limit(bindparam("limit", type_=Integer))


@cache
def _read_stmt(shape: access.ReadShape, preview: bool) -> Select[Any]:
    """One mail if the reader may read it (access.may_read_mail_sql: the read
    rule with the reader's values as parameters, so built once per shape)."""
    return (
        select(*page_columns(preview=preview))
        .join(SessionRow, SessionRow.id == MailRow.session_id)
        .where(
            MailRow.id == bindparam("mail_id"),
            access.may_read_mail_sql(shape, MailRow.seq, MailRow.session_id),
        )
        .limit(bindparam("limit", type_=Integer))
    )


@cache
def _anchor_stmt(shape: access.ReadShape) -> Select[Any]:
    """A thread's anchor: its session, if the reader may read it."""
    return select(MailRow.session_id).where(
        MailRow.id == bindparam("mail_id"), access.may_read_sql(shape, MailRow.session_id)
    )


@cache
def _page_read_log(newest_first: bool) -> Any:
    """A page's read log in one INSERT … SELECT over its mails, in the page's
    order: one set of parameters, where 50 rows of them cost more CPU than
    the page's own SELECT (bind processing of each row's values)."""
    log = ReadLogRow.__table__.c
    mails = (
        select(
            bindparam("log_reader", type_=log.reader.type),
            bindparam("log_kind", type_=log.reader_kind.type),
            MailRow.id,
            MailRow.session_id,
            bindparam("log_scope", type_=log.scope_session_id.type),
            bindparam("log_action", type_=log.action.type),
            bindparam("log_at", type_=log.at.type),
        )
        .where(MailRow.seq.in_(bindparam("seqs", expanding=True)))
        .order_by(MailRow.seq.desc() if newest_first else MailRow.seq)
    )
    columns = ["reader", "reader_kind", "mail_id", "session_id", "scope_session_id", "action", "at"]
    return _READ_LOG.from_select(columns, mails)


async def _rows(
    s: AsyncSession, stmt: Select[Any], params: BindParams, limit: int
) -> Sequence[Sequence[Any]]:
    """A page's statement, `limit` + 1 rows asked (is there more?), for `page_of`."""
    rows: Sequence[Sequence[Any]] = (await s.execute(stmt, {**params, "limit": limit + 1})).all()
    return rows


async def page_of(
    s: AsyncSession,
    reader: Principal,
    rows: Sequence[Sequence[Any]],
    limit: int,
    *,
    scope_session_id: str | None,
    action: str,
    body_limit: int | None,
    mark: bool = False,
    newest_first: bool = False,
) -> tuple[list[JsonObject], str | None]:
    """A page of `rows` (PAGE_MAIL_COLUMNS; up to `limit` + 1: is there more?):
    its people, its read log and, with `mark`, its read state; the JSON items,
    one per row kept, in the rows' order. `newest_first`: the page's order (its
    read log rows are written in it)."""
    more = len(rows) > limit
    rows = rows[:limit]
    if not rows:
        return [], None
    seqs = [r[0] for r in rows]
    with_files = [r[0] for r in rows if r[HAS_FILES_AT]]
    people = page_people(rows, await attachments.refs_for_mails(s, with_files))
    now = utcnow()
    await record_reads(s, reader, seqs, scope_session_id, action, now, newest_first)
    items = page_items(rows, people, reader.name, body_limit)  # read state as listed
    await _hide_request_inputs(s, reader, rows, items)
    if mark:
        ids = [rid for p in people.values() if (rid := p.unread.get(reader.name)) is not None]
        if ids:
            await s.execute(_MARK_READ, {"ids": ids, "now": now})
    return items, (str(seqs[-1]) if more else None)


async def _hide_request_inputs(
    s: AsyncSession, reader: Principal, rows: Sequence[Sequence[Any]], items: list[JsonObject]
) -> None:
    """A request mail's input only for the session's deciders and the agent that
    asked (services/request_input.py): a statement more only when the page holds
    a request mail someone else asked."""
    at = [PAGE_MAIL_COLUMNS.index(c) for c in ("id", "session_id", "from_name", "from_human")]
    heads = [
        request_input.MailHead(r[at[0]], r[at[1]], r[TYPE_AT], r[at[2]], bool(r[at[3]]))
        for r in rows
        if r[TYPE_AT] == request_input.REQUEST_MAIL
    ]
    hidden = await request_input.hidden(s, reader, heads) if heads else {}
    for item in items:
        shown = hidden.get(str(item["id"]))
        if shown is not None:
            item.update(subject=shown.subject, body=shown.body, body_truncated=False)


async def inbox(
    s: AsyncSession,
    reader: Principal,
    *,
    status: str,
    session_id: str | None,
    limit: int,
    cursor: str | None,
    newest_first: bool,
    mark: bool,
    q: str | None = None,
    body_limit: int | None = None,
) -> tuple[list[JsonObject], str | None]:
    """Mail addressed to `reader`, as JSON objects (the InboxItem shape). With
    `mark`, exactly the listed rows become read."""
    after = parse_cursor(cursor)
    params: BindParams = {"reader": reader.name}
    if session_id is not None:
        params["session_id"] = session_id
    if q:
        params["pattern"] = _like(q)
    if after is not None:
        params["after"] = after
    if body_limit:
        params["body_chars"] = body_limit + 1
    stmt = _inbox_stmt(
        status == "unread", session_id is not None, bool(q), after is not None,
        newest_first, bool(body_limit),
    )  # fmt: skip
    return await page_of(
        s, reader, await _rows(s, stmt, params, limit), limit,
        scope_session_id=session_id, action="inbox", body_limit=body_limit, mark=mark,
        newest_first=newest_first,
    )  # fmt: skip


async def readable(s: AsyncSession, reader: access.Reader, mail_id: str) -> MailContext:
    """The mail, if `reader` may read it (docs/access.md); else NotFound, as if it did not exist."""
    mail = await s.scalar(select(MailRow).where(MailRow.id == mail_id))
    if mail is None:
        raise not_found(f"mail '{mail_id}'")
    ctx = (await contexts(s, [mail]))[0]
    if not await reader.can_read_mail(s, ctx.session, (r.name for r in ctx.recipients)):
        raise not_found(f"mail '{mail_id}'")
    return ctx


async def read_mail(
    s: AsyncSession, reader: access.Reader, mail_id: str, *, body_limit: int | None
) -> JsonObject:
    """One mail (the MailOut shape), logged and marked read; NotFound, as if it
    did not exist, unless `reader` may read it (access.Reader.may_read_mail, the
    SQL form of can_read_mail, in the same statement)."""
    params: BindParams = {"mail_id": mail_id, **reader.sql_params()}
    if body_limit:
        params["body_chars"] = body_limit + 1
    rows = await _rows(s, _read_stmt(reader.shape, bool(body_limit)), params, 1)
    items, _ = await page_of(
        s, reader.principal, rows, 1,
        scope_session_id=reader.scope_id, action="read", body_limit=body_limit, mark=True,
    )  # fmt: skip
    if not items:
        raise not_found(f"mail '{mail_id}'")
    items[0]["read"] = True  # marked in this transaction: it is read as answered
    return items[0]


async def mark_read_request(
    s: AsyncSession, reader: Principal, session_id: str | None, mail_ids: list[str] | None
) -> int:
    if session_id is None and mail_ids is None:
        raise Missing("mail_ids", "give session_id or mail_ids (or both)")
    # One UPDATE of the reader's own unread rows (it was a load of every such
    # mail with its recipients and attachments, then one UPDATE per row).
    mails = select(MailRow.seq)
    if session_id is not None:
        mails = mails.where(MailRow.session_id == session_id)
    if mail_ids is not None:
        mails = mails.where(MailRow.id.in_(mail_ids))
    recipients = RecipientRow.__table__.c
    done = await s.execute(
        update(RecipientRow.__table__)  # type: ignore[arg-type]
        .where(
            recipients.name == reader.name,
            recipients.read_at.is_(None),
            recipients.mail_seq.in_(mails),
        )
        .values(read_at=utcnow())
    )
    return int(cast("CursorResult[Any]", done).rowcount)


async def thread(
    s: AsyncSession, reader: access.Reader, mail_id: str, *, limit: int, cursor: str | None
) -> tuple[list[JsonObject], str | None]:
    """Every mail of that mail's session, oldest first (a session is a thread)."""
    access.require_scope(reader, "reading a thread")
    # The anchor and the read rule in one statement (access.Reader.may_read, the
    # SQL form of can_read): NotFound, as if it did not exist, when unreadable.
    session_id = await s.scalar(
        _anchor_stmt(reader.shape), {"mail_id": mail_id, **reader.sql_params()}
    )
    if session_id is None:
        raise not_found(f"mail '{mail_id}'")
    return await _session_mails(s, reader, session_id, limit=limit, cursor=cursor)


async def session_thread(
    s: AsyncSession, reader: access.Reader, session_id: str, *, limit: int, cursor: str | None
) -> tuple[list[JsonObject], str | None]:
    """The same thread, named by its session (the web UI's `/sessions/{id}`);
    a session `reader` may not read is 404."""
    access.require_scope(reader, "reading a thread")
    session = await s.get(SessionRow, session_id)
    if session is None:
        raise not_found(f"session '{session_id}'")
    await reader.ensure_read(s, session, f"session '{session_id}'")
    return await _session_mails(s, reader, session_id, limit=limit, cursor=cursor)


async def _session_mails(
    s: AsyncSession, reader: access.Reader, session_id: str, *, limit: int, cursor: str | None
) -> tuple[list[JsonObject], str | None]:
    after = parse_cursor(cursor)
    params: BindParams = {"session_id": session_id}
    if after is not None:
        params["after"] = after
    rows = await _rows(s, _thread_stmt(after is not None), params, limit)
    return await page_of(
        s, reader.principal, rows, limit,
        scope_session_id=reader.scope_id, action="thread", body_limit=None,
    )  # fmt: skip
