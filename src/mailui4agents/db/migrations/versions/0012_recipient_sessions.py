"""recipient sessions: who takes part in which session, from indexes alone

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 15:00:00.000000

Every list scoped to a reader (search, session list, attachments, grants) asks
for the sessions that reader sent or received mail in (services/access.py
sessions_of). At 1,000,000 mails that took 210 ms for one user (bench/scale.py):
the received half looked up each of the reader's ~30,000 mails by primary key
for its session, the sent half fetched each sent mail's row. mail_recipients now
carries its mail's session (written with the row, backfilled here; NULL only
never written), and (name, session_id) on mail_recipients and (from_name,
session_id) on mails answer both halves from covering indexes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mail_recipients", sa.Column("session_id", sa.String(36), nullable=True))
    op.execute(
        "UPDATE mail_recipients SET session_id = "
        "(SELECT mails.session_id FROM mails WHERE mails.seq = mail_recipients.mail_seq)"
    )
    op.create_index(
        "ix_mail_recipients_name_session_id",
        "mail_recipients",
        ["name", "session_id"],
        unique=False,
    )
    op.create_index("ix_mails_from_name_session_id", "mails", ["from_name", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_mails_from_name_session_id", table_name="mails")
    op.drop_index("ix_mail_recipients_name_session_id", table_name="mail_recipients")
    with op.batch_alter_table("mail_recipients") as batch:
        batch.drop_column("session_id")
