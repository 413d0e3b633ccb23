"""E-mail: people's addresses (verified by a mailed link) and an outbox

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 13:30:00.000000

A person's address counts once the link mailed to it is used (docs/email.md).
Outgoing e-mail is a row of `email_outbox`, written in the transaction that makes
it necessary and sent after commit by SMTP, claimed like a push.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str, ondelete: str = "CASCADE") -> sa.Constraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def upgrade() -> None:
    op.create_table(
        "email_addresses",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("address", sa.String(length=254), nullable=False),
        sa.Column("verified_at", UTCDateTime(), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("token_expires_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        _fk("email_addresses", "user_id", "users"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_addresses")),
        sa.UniqueConstraint("user_id", "address", name=op.f("uq_email_addresses_user_id_address")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_email_addresses_token_hash")),
    )
    op.create_index("ix_email_addresses_user_id", "email_addresses", ["user_id"])
    op.create_index("ix_email_addresses_address", "email_addresses", ["address"])
    op.create_table(
        "email_outbox",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("address_id", sa.String(length=36), nullable=True),
        sa.Column("request_id", sa.String(length=36), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("to_addr", sa.String(length=254), nullable=False),
        sa.Column("message_id", sa.String(length=300), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", UTCDateTime(), nullable=False),
        sa.Column("claimed_until", UTCDateTime(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("done_at", UTCDateTime(), nullable=True),
        _fk("email_outbox", "user_id", "users"),
        _fk("email_outbox", "address_id", "email_addresses", ondelete="SET NULL"),
        _fk("email_outbox", "request_id", "permissions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_outbox")),
        sa.UniqueConstraint("message_id", name=op.f("uq_email_outbox_message_id")),
    )
    op.create_index("ix_email_outbox_state_next_at", "email_outbox", ["state", "next_at"])
    op.create_index("ix_email_outbox_user_id", "email_outbox", ["user_id"])
    op.create_index("ix_email_outbox_address_id", "email_outbox", ["address_id"])
    op.create_index("ix_email_outbox_request_id", "email_outbox", ["request_id"])


def downgrade() -> None:
    op.drop_index("ix_email_outbox_request_id", table_name="email_outbox")
    op.drop_index("ix_email_outbox_address_id", table_name="email_outbox")
    op.drop_index("ix_email_outbox_user_id", table_name="email_outbox")
    op.drop_index("ix_email_outbox_state_next_at", table_name="email_outbox")
    op.drop_table("email_outbox")
    op.drop_index("ix_email_addresses_address", table_name="email_addresses")
    op.drop_index("ix_email_addresses_user_id", table_name="email_addresses")
    op.drop_table("email_addresses")
