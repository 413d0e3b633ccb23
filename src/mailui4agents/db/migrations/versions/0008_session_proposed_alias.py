"""sessions: the alias an agent proposed, until a decider accepts it

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 11:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, no default): no table rebuild.
    op.add_column("sessions", sa.Column("proposed_alias", sa.String(length=100), nullable=True))
    op.add_column("sessions", sa.Column("proposed_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch_op:
        batch_op.drop_column("proposed_by")
        batch_op.drop_column("proposed_alias")
