"""tokens expire: login tokens get a lifetime, rotated agent keys a grace end

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 08:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import mailui4agents.db.types

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, no default): no table rebuild, so the FTS
    # triggers on other tables stay as they are.
    op.add_column(
        "user_tokens",
        sa.Column("expires_at", mailui4agents.db.types.UTCDateTime(timezone=True), nullable=True),
    )
    op.add_column(
        "agent_keys",
        sa.Column("expires_at", mailui4agents.db.types.UTCDateTime(timezone=True), nullable=True),
    )
    op.create_index(op.f("ix_user_tokens_user_id"), "user_tokens", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_user_tokens_user_id"), table_name="user_tokens")
    with op.batch_alter_table("agent_keys") as batch_op:
        batch_op.drop_column("expires_at")
    with op.batch_alter_table("user_tokens") as batch_op:
        batch_op.drop_column("expires_at")
