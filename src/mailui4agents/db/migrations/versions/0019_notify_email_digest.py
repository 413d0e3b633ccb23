"""The daily digest by e-mail: the hour a person wants it, and the day it was sent

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 18:00:00.000000

`notify_policies.email_digest_hour` (0-23 in the person's `timezone`; NULL, the
default: no digest) and `digest_sent_on`, the person's local date (YYYY-MM-DD)
of the last digest, which a conditional UPDATE claims so that one replica sends
each day's digest once (docs/email.md, "Daily digest").
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("notify_policies") as batch:
        batch.add_column(sa.Column("email_digest_hour", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("digest_sent_on", sa.String(length=10), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notify_policies") as batch:
        batch.drop_column("digest_sent_on")
        batch.drop_column("email_digest_hour")
