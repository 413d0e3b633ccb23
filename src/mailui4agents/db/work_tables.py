"""The tables of reviewing an agent's work (docs/review.md): the worktree a
session runs in (as its bridge reports it), the merge / discard / keep actions
its owners ask for, and people's comments on the lines of a `work` mail's patch."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from mailui4agents.db.base import Base, new_id
from mailui4agents.db.types import UTCDateTime, utcnow


class SessionWorkRow(Base):
    """The worktree of one session, written by the agent that runs it
    (`PUT /agent/sessions/{id}/work`): where it is, what it came from, how big
    it is and whether it holds work not merged yet."""

    __tablename__ = "session_work"
    __table_args__ = (Index("ix_session_work_state", "state"),)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    agent: Mapped[str] = mapped_column(String(200))
    branch: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(Text)
    base_branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    base_commit: Mapped[str] = mapped_column(String(40))
    head_commit: Mapped[str] = mapped_column(String(40))
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    state: Mapped[str] = mapped_column(String(10))  # active | removed
    dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    unmerged: Mapped[int] = mapped_column(Integer, default=0)
    # The git remote the branch can be pushed to ("Open PR"); None: no remote.
    remote: Mapped[str | None] = mapped_column(String(255), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WorkActionRow(Base):
    """An owner's merge, discard or keep of a session's worktree, and the bridge's
    answer. At most one `pending` per session: a partial unique index (SQLite and
    PostgreSQL both have them) makes the database refuse a second."""

    __tablename__ = "work_actions"
    __table_args__ = (
        Index("ix_work_actions_session_id_created_at", "session_id", "created_at"),
        Index("ix_work_actions_agent_status", "agent", "status"),
        Index(
            "ix_work_actions_one_pending",
            "session_id",
            unique=True,
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(10))  # merge | discard | keep | push
    requested_by: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(10), default="pending")
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    conflicts: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ReviewCommentRow(Base):
    """A person's comment on lines of a `work` mail's patch; `code` is what the
    gateway cut from the stored patch when it was made. Pending until its author
    sends the review (`sent_mail_id`, `sent_at`)."""

    __tablename__ = "review_comments"
    __table_args__ = (
        Index("ix_review_comments_session_id_author_sent_at", "session_id", "author", "sent_at"),
        Index("ix_review_comments_mail_id", "mail_id"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    mail_id: Mapped[str] = mapped_column(String(36))
    author: Mapped[str] = mapped_column(String(200))
    path: Mapped[str] = mapped_column(String(1000))
    side: Mapped[str] = mapped_column(String(3))  # new | old
    line: Mapped[int] = mapped_column(Integer)
    end_line: Mapped[int | None] = mapped_column(Integer, nullable=True)
    body: Mapped[str] = mapped_column(Text)
    code: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_mail_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
