"""Comments on the lines of a `work` mail's patch, and the review mail that
carries a person's pending ones to the agent (docs/review.md).

A comment's place is checked against the mail's own attachments: its `path`
must be a file of `work.json`, its lines must be on that side of that file's
hunks in `turn.diff`; the gateway cuts the commented lines (and up to three
around them) from the stored patch then, so the review quotes what the person
saw even once the worktree moved on. Both attachments are untrusted input."""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import AttachmentRow, MailAttachmentRow, MailRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.db.work_tables import ReviewCommentRow, SessionWorkRow
from mailui4agents.domain import patch
from mailui4agents.domain.errors import Conflict, forbidden, invalid_value, not_found
from mailui4agents.domain.mail_types import MailType
from mailui4agents.domain.results import Sent
from mailui4agents.events import log
from mailui4agents.services import access, sending
from mailui4agents.services.blobs import BlobStore
from mailui4agents.services.principals import Principal
from mailui4agents.services.wire_shapes import session_address
from mailui4agents.services.work import comment_out, count_pending_comments, readable_session
from mailui4agents.state import Gateway
from mailui4agents.wire.work import ReviewCommentOut, ReviewSent

MAX_PENDING = 200  # a person's unsent comments in one session (docs/limits.md)
MAX_BODY = 4000  # characters of one comment
MAX_PATH = 1000
MAX_RANGE = 200  # end_line at most line + this
WORK_JSON, TURN_DIFF = "work.json", "turn.diff"
WORK_JSON_MAX = 1 << 20  # bytes of work.json read (the contract's own cap)


@dataclass(frozen=True)
class CommentIn:
    path: str
    line: int
    body: str
    end_line: int | None = None
    side: patch.Side = "new"


def _check(c: CommentIn) -> None:
    """Limits the route's schema states as well; checked here for every adapter."""
    if not c.path or len(c.path) > MAX_PATH:
        raise invalid_value("path", f"path must be 1 to {MAX_PATH} characters", limit=MAX_PATH)
    if not c.body.strip() or len(c.body) > MAX_BODY:
        raise invalid_value("body", f"body must be 1 to {MAX_BODY} characters", limit=MAX_BODY)
    if c.line < 1:
        raise invalid_value("line", "line must be 1 or more")
    if c.end_line is not None and not c.line <= c.end_line <= c.line + MAX_RANGE:
        raise invalid_value(
            "end_line",
            f"end_line must be from line ({c.line}) to line + {MAX_RANGE}",
            limit=MAX_RANGE,
        )


async def _work_files(gw: Gateway, mail: MailRow) -> tuple[list[str], str | None]:
    """The file paths `work.json` lists and the text of `turn.diff` (None when
    the mail has none: the patch was past the bridge's cap)."""
    async with gw.read() as s:
        rows = list(
            await s.scalars(
                select(AttachmentRow)
                .join(MailAttachmentRow, MailAttachmentRow.attachment_id == AttachmentRow.id)
                .where(MailAttachmentRow.mail_seq == mail.seq)
                .order_by(MailAttachmentRow.position)
            )
        )
    by_name = {r.name: r for r in reversed(rows)}  # the first of a name wins
    store = BlobStore.for_settings(gw.settings)

    def read(row: AttachmentRow, cap: int) -> bytes:
        with store.open(row.sha256) as f:
            return f.read(cap + 1)

    summary = by_name.get(WORK_JSON)
    if summary is None:
        raise Conflict("this work mail has no work.json", reason="no_patch")
    raw = await anyio.to_thread.run_sync(read, summary, WORK_JSON_MAX)
    paths = _paths_of(raw)
    diff = by_name.get(TURN_DIFF)
    if diff is None:
        return paths, None
    text = await anyio.to_thread.run_sync(read, diff, gw.settings.attachment_max_bytes)
    return paths, text.decode("utf-8", "replace")


def _paths_of(raw: bytes) -> list[str]:
    """The `files[].path` of a work.json, or a Conflict when it is not one."""
    try:
        data = json.loads(raw) if len(raw) <= WORK_JSON_MAX else None
        files = data["files"] if isinstance(data, dict) else None
        if not isinstance(files, list):
            raise ValueError
        paths = [f["path"] for f in files if isinstance(f, dict)]
        if not all(isinstance(p, str) for p in paths):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise Conflict("this work mail's work.json is not readable", reason="no_patch") from None
    return paths


def _place(diff: str, c: CommentIn) -> tuple[str | None, bool]:
    """The comment's code cut from the patch (None: its lines are not all in one
    hunk of that side), and whether its first line is. In a worker thread: a
    patch of 25 MiB is about a second of parsing, never on the event loop."""
    fp = patch.file_patch(diff, c.path, near=(c.side, c.line))
    if fp is None:
        return None, False
    last = c.end_line if c.end_line is not None else c.line
    code = patch.cut(fp, c.side, c.line, last)
    return code, code is not None or patch.cut(fp, c.side, c.line, c.line) is not None


async def add_comment(gw: Gateway, who: Principal, mail_id: str, c: CommentIn) -> ReviewCommentOut:
    """A person's comment on lines of a `work` mail they can read."""
    _check(c)
    what = f"mail '{mail_id}'"
    async with gw.read() as s:
        mail = await s.scalar(select(MailRow).where(MailRow.id == mail_id))
        if mail is None:
            raise not_found(what)
        session = await s.get(SessionRow, mail.session_id)
        assert session is not None
        await access.Reader(who).ensure_read(s, session, what)
    if mail.type != MailType.WORK:
        raise invalid_value("mail_id", "comments go on a work mail (a turn's diff)")
    paths, diff = await _work_files(gw, mail)
    if c.path not in paths:
        raise invalid_value("path", f"'{c.path}' is not a file of this work mail")
    if diff is None:
        raise Conflict(
            "this turn's patch was past the bridge's limit: only its summary is attached",
            reason="no_patch",
        )
    code, first_ok = await anyio.to_thread.run_sync(_place, diff, c)
    if code is None:
        field = "end_line" if first_ok and c.end_line is not None else "line"
        lines = f"{c.line}" if c.end_line is None else f"{c.line}-{c.end_line}"
        raise invalid_value(
            field, f"line {lines} of {c.side} side is not in the patch of '{c.path}'"
        )
    async with gw.write() as s:
        # PostgreSQL: one writer at a time past this point, so two comments at
        # once cannot both pass the count (SQLite has one writer anyway).
        await log.take_event_lock(s)
        if await count_pending_comments(s, session.id, who.name) >= MAX_PENDING:
            raise Conflict(
                f"you have {MAX_PENDING} comments not sent in this session: send the review first",
                reason="too_many_comments",
                limit=MAX_PENDING,
            )
        row = ReviewCommentRow(
            session_id=session.id,
            mail_id=mail.id,
            author=who.name,
            path=c.path,
            side=c.side,
            line=c.line,
            end_line=c.end_line,
            body=c.body,
            code=code,
            created_at=utcnow(),
        )
        s.add(row)
        await s.flush()
        return comment_out(row)


async def delete_comment(s: AsyncSession, who: Principal, comment_id: str) -> None:
    """Its author takes back a comment not sent yet (403 for others, 409 already_sent)."""
    what = f"comment '{comment_id}'"
    row = await s.get(ReviewCommentRow, comment_id)
    if row is None:
        raise not_found(what)
    session = await s.get(SessionRow, row.session_id)
    assert session is not None
    await access.Reader(who).ensure_read(s, session, what)
    if row.author != who.name:
        raise forbidden("only its author may delete a comment")
    if row.sent_at is not None:
        raise Conflict("this comment was sent already", reason="already_sent")
    await s.delete(row)


def review_body(comments: list[ReviewCommentRow]) -> str:
    """Each comment in file and line order: where, the code it is on, the comment."""
    parts = []
    for c in comments:
        where = (
            f"{c.line}" if c.end_line is None or c.end_line == c.line else f"{c.line}-{c.end_line}"
        )
        fence = "```"
        while fence in c.code:  # a patch line holding ``` must not end the block
            fence += "`"
        parts.append(f"{c.path}, line {where} ({c.side}):\n{fence}\n{c.code}\n{fence}\n{c.body}")
    return "\n\n".join(parts) + "\n"


async def send_review(gw: Gateway, who: Principal, session_id: str) -> ReviewSent:
    """One mail from `who` to the agent(s) whose `work` mails are in the session,
    as a reply to the newest: every pending comment of `who`, marked sent in the
    mail's own transaction (409 nothing_to_send without one). The normal send
    path: `who` must be allowed to mail that agent there."""
    async with gw.read() as s:
        session = await readable_session(s, who, session_id)
        comments = list(
            await s.scalars(
                select(ReviewCommentRow)
                .where(
                    ReviewCommentRow.session_id == session_id,
                    ReviewCommentRow.author == who.name,
                    ReviewCommentRow.sent_at.is_(None),
                )
                .order_by(
                    ReviewCommentRow.path,
                    ReviewCommentRow.side,
                    ReviewCommentRow.line,
                    ReviewCommentRow.created_at,
                )
            )
        )
        works = list(
            (
                await s.execute(
                    select(MailRow.id, MailRow.from_name)
                    .where(MailRow.session_id == session_id, MailRow.type == MailType.WORK)
                    .order_by(MailRow.seq.desc())
                )
            ).all()
        )
    if not comments:
        raise Conflict("you have no comment to send in this session", reason="nothing_to_send")
    if not works:  # pragma: no cover - a comment is always on a work mail
        raise Conflict("this session has no work mail", reason="nothing_to_send")
    agents = list(dict.fromkeys(name for _, name in works))
    branch = await _branch(gw, session_id)
    n = len(comments)
    draft = sending.Draft(
        to=[session_address(session, a) for a in agents],
        subject=f"Review: {n} comment{'s' if n != 1 else ''} on {branch}",
        body=review_body(comments),
        parent_mail_id=works[0][0],
    )
    ids = [c.id for c in comments]

    async def mark(s: AsyncSession, sent: Sent) -> None:
        done = await s.execute(
            update(ReviewCommentRow)
            .where(ReviewCommentRow.id.in_(ids), ReviewCommentRow.sent_at.is_(None))
            .values(sent_mail_id=sent.mail.id, sent_at=utcnow())
        )
        if done.rowcount != len(ids):  # type: ignore[attr-defined]
            raise Conflict(
                "your comments changed while the review was sent: send it again",
                reason="comments_changed",
            )

    result = await sending.send(gw, who, draft, also=mark)
    assert isinstance(result.outcome, Sent)  # no relay key: never a duplicate
    return ReviewSent(mail_id=result.outcome.mail.id, comments=n)


async def _branch(gw: Gateway, session_id: str) -> str:
    async with gw.read() as s:
        work = await s.get(SessionWorkRow, session_id)
    return work.branch if work is not None else "the worktree"
