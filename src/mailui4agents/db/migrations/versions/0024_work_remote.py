"""The git remote of a session's worktree ("Open PR")

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 21:00:00.000000

`session_work.remote`: the remote the bridge can push the session's branch to
(docs/review.md); NULL when the repository has none.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable ADD COLUMN: no table rebuild on either backend.
    op.add_column("session_work", sa.Column("remote", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_work") as batch:
        batch.drop_column("remote")
