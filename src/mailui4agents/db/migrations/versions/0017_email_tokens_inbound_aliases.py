"""E-mail in: reply and one-click tokens, the inbound log, workspace aliases

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 16:40:00.000000

Each outgoing e-mail to a person carries tokens (its reply address, its
one-click links) bound to that person and to the request or session it is
about (`email_tokens`). Each inbound e-mail is logged, accepted or refused,
once per Message-ID (`email_inbound`). New work by e-mail names a workspace by
an alias the admin keeps (`workspace_aliases`). The outbox learns the session
(the thread) and the mail an e-mail carries; one mail to several people is one
Message-ID, so the unique key becomes (message_id, to_addr). docs/email.md.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str, ondelete: str = "CASCADE") -> sa.Constraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def upgrade() -> None:
    with op.batch_alter_table("email_outbox") as batch:
        batch.add_column(sa.Column("session_id", sa.String(length=36), nullable=True))
        batch.add_column(sa.Column("mail_id", sa.String(length=36), nullable=True))
        batch.drop_constraint("uq_email_outbox_message_id", type_="unique")
        batch.create_unique_constraint(
            "uq_email_outbox_message_id_to_addr", ["message_id", "to_addr"]
        )
        batch.create_foreign_key(
            "fk_email_outbox_session_id_sessions",
            "sessions",
            ["session_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch.create_index("ix_email_outbox_session_id", ["session_id"])
    op.create_table(
        "email_tokens",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("address_id", sa.String(length=36), nullable=True),
        sa.Column("request_id", sa.String(length=36), nullable=True),
        sa.Column("session_id", sa.String(length=36), nullable=True),
        sa.Column("mail_id", sa.String(length=36), nullable=True),
        sa.Column("message_id", sa.String(length=300), nullable=True),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        _fk("email_tokens", "user_id", "users"),
        _fk("email_tokens", "address_id", "email_addresses", ondelete="SET NULL"),
        _fk("email_tokens", "request_id", "permissions"),
        _fk("email_tokens", "session_id", "sessions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_email_tokens_token_hash")),
    )
    for column in ("user_id", "address_id", "request_id", "session_id"):
        op.create_index(f"ix_email_tokens_{column}", "email_tokens", [column])
    op.create_table(
        "email_inbound",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("dedupe_key", sa.String(length=300), nullable=False),
        sa.Column("via", sa.String(length=10), nullable=False),
        sa.Column("from_addr", sa.String(length=254), nullable=True),
        sa.Column("to_addr", sa.String(length=254), nullable=True),
        sa.Column("subject", sa.String(length=300), nullable=True),
        sa.Column("user_id", sa.String(length=36), nullable=True),
        sa.Column("token_id", sa.String(length=36), nullable=True),
        sa.Column("request_id", sa.String(length=36), nullable=True),
        sa.Column("session_id", sa.String(length=36), nullable=True),
        sa.Column("mail_id", sa.String(length=36), nullable=True),
        sa.Column("outcome", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        _fk("email_inbound", "user_id", "users", ondelete="SET NULL"),
        _fk("email_inbound", "token_id", "email_tokens", ondelete="SET NULL"),
        _fk("email_inbound", "request_id", "permissions", ondelete="SET NULL"),
        _fk("email_inbound", "session_id", "sessions", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_inbound")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_email_inbound_dedupe_key")),
    )
    op.create_index(
        "ix_email_inbound_user_id_received_at", "email_inbound", ["user_id", "received_at"]
    )
    op.create_index("ix_email_inbound_request_id", "email_inbound", ["request_id"])
    op.create_table(
        "workspace_aliases",
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=36), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_workspace_aliases_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("alias", name=op.f("pk_workspace_aliases")),
    )


def downgrade() -> None:
    op.drop_table("workspace_aliases")
    op.drop_index("ix_email_inbound_request_id", table_name="email_inbound")
    op.drop_index("ix_email_inbound_user_id_received_at", table_name="email_inbound")
    op.drop_table("email_inbound")
    for column in ("session_id", "request_id", "address_id", "user_id"):
        op.drop_index(f"ix_email_tokens_{column}", table_name="email_tokens")
    op.drop_table("email_tokens")
    with op.batch_alter_table("email_outbox") as batch:
        batch.drop_index("ix_email_outbox_session_id")
        batch.drop_constraint("fk_email_outbox_session_id_sessions", type_="foreignkey")
        batch.drop_constraint("uq_email_outbox_message_id_to_addr", type_="unique")
        batch.create_unique_constraint("uq_email_outbox_message_id", ["message_id"])
        batch.drop_column("mail_id")
        batch.drop_column("session_id")
