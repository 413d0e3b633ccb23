"""calendar: scheduled mail, its attachments and its delivered occurrences

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import SerialId, UTCDateTime

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calendar_entries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("creator_kind", sa.String(length=10), nullable=False),
        sa.Column("to", sa.JSON(), nullable=False),
        sa.Column("cc", sa.JSON(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("from_session_id", sa.String(length=36), nullable=True),
        sa.Column("permission_mode", sa.String(length=20), nullable=True),
        sa.Column("start_local", sa.String(length=32), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("rrule", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("next_due", UTCDateTime(), nullable=True),
        sa.Column("delivered", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendar_entries")),
    )
    op.create_index(
        "ix_calendar_entries_status_next_due", "calendar_entries", ["status", "next_due"]
    )
    op.create_index(
        "ix_calendar_entries_created_by_status", "calendar_entries", ["created_by", "status"]
    )
    op.create_table(
        "calendar_attachments",
        sa.Column("entry_id", sa.String(length=36), nullable=False),
        sa.Column("attachment_id", sa.String(length=36), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entry_id"],
            ["calendar_entries.id"],
            name=op.f("fk_calendar_attachments_entry_id_calendar_entries"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["attachment_id"],
            ["attachments.id"],
            name=op.f("fk_calendar_attachments_attachment_id_attachments"),
        ),
        sa.PrimaryKeyConstraint("entry_id", "attachment_id", name=op.f("pk_calendar_attachments")),
    )
    op.create_index(
        "ix_calendar_attachments_attachment_id", "calendar_attachments", ["attachment_id"]
    )
    op.create_table(
        "calendar_occurrences",
        sa.Column("id", SerialId, autoincrement=True, nullable=False),
        sa.Column("entry_id", sa.String(length=36), nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=False),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("mail_id", sa.String(length=36), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["entry_id"],
            ["calendar_entries.id"],
            name=op.f("fk_calendar_occurrences_entry_id_calendar_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendar_occurrences")),
        sa.UniqueConstraint(
            "entry_id", "due_at", name=op.f("uq_calendar_occurrences_entry_id_due_at")
        ),
    )


def downgrade() -> None:
    op.drop_table("calendar_occurrences")
    op.drop_index("ix_calendar_attachments_attachment_id", table_name="calendar_attachments")
    op.drop_table("calendar_attachments")
    op.drop_index("ix_calendar_entries_created_by_status", table_name="calendar_entries")
    op.drop_index("ix_calendar_entries_status_next_due", table_name="calendar_entries")
    op.drop_table("calendar_entries")
