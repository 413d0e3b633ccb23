"""Shapes of reviewing an agent's work (docs/api.md, "Work and review";
docs/review.md): a session's worktree, the actions on it, review comments."""

from __future__ import annotations

from pydantic import Field

from mailui4agents.wire.models import Lenient, Timestamp
from mailui4agents.wire.models import WorkActionOut as WorkActionOut


class SessionWorkOut(Lenient):
    """The worktree a session runs in, as its agent's bridge last reported it."""

    session_id: str
    agent: str
    branch: str
    path: str
    base_branch: str | None = None
    base_commit: str
    head_commit: str
    bytes: int = 0
    state: str  # active | removed
    dirty: bool = False
    unmerged: int = 0
    #: The git remote the branch can be pushed to ("Open PR"); None: none.
    remote: str | None = None
    updated_at: Timestamp


class ReviewCommentOut(Lenient):
    """A comment on lines of a `work` mail's patch; `code` is those lines with up to
    three of context each side, as the gateway cut them; sent once `sent_at` is set."""

    id: str
    session_id: str
    mail_id: str
    author: str
    path: str
    side: str
    line: int
    end_line: int | None = None
    body: str
    code: str
    created_at: Timestamp
    sent_mail_id: str | None = None
    sent_at: Timestamp | None = None


class WorkOut(Lenient):
    """`GET /sessions/{id}/work`: the session's worktree (None before its first
    report), its last 20 actions newest first, the comments oldest first, and how
    many of the viewer's own are not sent yet."""

    worktree: bool = False
    work: SessionWorkOut | None = None
    actions: list[WorkActionOut] = Field(default_factory=list)
    comments: list[ReviewCommentOut] = Field(default_factory=list)
    pending_comments: int = 0


class ReviewSent(Lenient):
    """The review mail sent and how many comments it carried."""

    mail_id: str
    comments: int


class WorktreeItem(Lenient):
    """One active worktree on the admin page."""

    session_id: str
    alias: str | None = None
    agent: str
    branch: str
    path: str
    bytes: int = 0
    state: str
    dirty: bool = False
    unmerged: int = 0
    updated_at: Timestamp


class WorktreesOut(Lenient):
    """Every active worktree and their disk use together."""

    total_bytes: int = 0
    count: int = 0
    items: list[WorktreeItem] = Field(default_factory=list)


class WorkAskOut(Lenient):
    """A retention question to the owners: the mail sent, or (`deduplicated`) the
    one still unanswered."""

    mail_id: str | None = None
    deduplicated: bool = False
