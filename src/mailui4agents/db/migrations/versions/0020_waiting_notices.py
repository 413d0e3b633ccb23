""" "Waiting for you" notices, one per session, kind and turn

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 21:20:00.000000

`waiting_notices`: the primary key (session_id, kind, turn) deduplicates the
notices an interactive agent sends when it waits for its person
(docs/platforms.md, "Interactive sessions"; services/waiting.py).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "waiting_notices",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("turn", sa.String(length=200), nullable=False),
        sa.Column("pushed", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "kind", "turn"),
    )
    op.create_index("ix_waiting_notices_created_at", "waiting_notices", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_waiting_notices_created_at", table_name="waiting_notices")
    op.drop_table("waiting_notices")
