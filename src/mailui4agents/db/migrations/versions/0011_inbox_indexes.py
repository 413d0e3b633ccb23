"""inbox indexes: a reader's mail in mail_seq order, all and unread

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 11:50:00.000000

At 1,000,000 mails an inbox page sorted every mail of its reader (EXPLAIN QUERY
PLAN: USE TEMP B-TREE FOR ORDER BY). (name, mail_seq) and (name, read_at,
mail_seq) give the page in order; the second replaces (name, read_at), which it
covers. See bench/scale.py.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_mail_recipients_name_mail_seq", "mail_recipients", ["name", "mail_seq"], unique=False
    )
    op.create_index(
        "ix_mail_recipients_name_read_at_mail_seq",
        "mail_recipients",
        ["name", "read_at", "mail_seq"],
        unique=False,
    )
    op.drop_index("ix_mail_recipients_name_read_at", table_name="mail_recipients")


def downgrade() -> None:
    op.create_index(
        "ix_mail_recipients_name_read_at", "mail_recipients", ["name", "read_at"], unique=False
    )
    op.drop_index("ix_mail_recipients_name_read_at_mail_seq", table_name="mail_recipients")
    op.drop_index("ix_mail_recipients_name_mail_seq", table_name="mail_recipients")
