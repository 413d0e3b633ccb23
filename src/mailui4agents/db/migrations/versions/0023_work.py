"""Reviewing the work: worktrees, their actions, review comments

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 19:30:00.000000

`sessions.worktree`: a person chose "own worktree" for the session.
`session_work`: the worktree a session runs in, as its bridge reports it.
`work_actions`: merge / discard / keep asked by an owner, answered by the
bridge; a partial unique index keeps one pending action per session.
`review_comments`: comments on lines of a `work` mail's patch (docs/review.md).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    # ADD COLUMN with a default: no table rebuild on either backend.
    op.add_column(
        "sessions", sa.Column("worktree", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_table(
        "session_work",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("base_branch", sa.String(length=255), nullable=True),
        sa.Column("base_commit", sa.String(length=40), nullable=False),
        sa.Column("head_commit", sa.String(length=40), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("dirty", sa.Boolean(), nullable=False),
        sa.Column("unmerged", sa.Integer(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index("ix_session_work_state", "session_work", ["state"])
    op.create_table(
        "work_actions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=10), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("conflicts", sa.JSON(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_work_actions_session_id_created_at", "work_actions", ["session_id", "created_at"]
    )
    op.create_index("ix_work_actions_agent_status", "work_actions", ["agent", "status"])
    op.create_index(
        "ix_work_actions_one_pending",
        "work_actions",
        ["session_id"],
        unique=True,
        sqlite_where=_PENDING,
        postgresql_where=_PENDING,
    )
    op.create_table(
        "review_comments",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("mail_id", sa.String(length=36), nullable=False),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("side", sa.String(length=3), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("end_line", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("sent_mail_id", sa.String(length=36), nullable=True),
        sa.Column("sent_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_review_comments_session_id_author_sent_at",
        "review_comments",
        ["session_id", "author", "sent_at"],
    )
    op.create_index("ix_review_comments_mail_id", "review_comments", ["mail_id"])


def downgrade() -> None:
    op.drop_table("review_comments")
    op.drop_table("work_actions")
    op.drop_table("session_work")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("worktree")
