"""Agents' mails by e-mail: a switch of its own in the notification policy

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 17:00:00.000000

`notify_policies.email` switches the request e-mails; `email_mail` switches the
e-mail of each agent's mail to the person (docs/email.md, "Agents' mails by
e-mail"). On for existing rows, as for people without a row: an address a
person verified is their wish to be reached there.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("notify_policies") as batch:
        batch.add_column(
            sa.Column("email_mail", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def downgrade() -> None:
    with op.batch_alter_table("notify_policies") as batch:
        batch.drop_column("email_mail")
