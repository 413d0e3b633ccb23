"""devices (named web sessions) and their one-time pairing codes

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 05:30:00.000000

`agentmail pair` shows a QR code whose URL logs a phone in as a named device
(docs/web.md, "Pairing a phone"). A device row names the user token of its web
session, so revoking the device revokes that token. A pairing keeps only the
SHA-256 of its code; it is used once and expires after five minutes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "devices",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("token_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_devices_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["user_tokens.id"],
            name=op.f("fk_devices_token_id_user_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
        sa.UniqueConstraint("token_id", name=op.f("uq_devices_token_id")),
    )
    op.create_index("ix_devices_user_id", "devices", ["user_id"], unique=False)
    op.create_table(
        "device_pairings",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_device_pairings_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_device_pairings")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_device_pairings_code_hash")),
    )
    op.create_index("ix_device_pairings_user_id", "device_pairings", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_device_pairings_user_id", table_name="device_pairings")
    op.drop_table("device_pairings")
    op.drop_index("ix_devices_user_id", table_name="devices")
    op.drop_table("devices")
