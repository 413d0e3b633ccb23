"""Web Push: subscriptions, an outbox, action tokens, per-request delivery tracking,
shared gateway keys, notification policies; where a decision came from

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 07:30:00.000000

A permission request is pushed to its deciders' devices (docs/remote.md, "Push").
Pushes are written to `push_outbox` in the transaction that makes them necessary
and sent after commit; `request_deliveries` records each step per channel and
device. `permissions.decided_channel`/`decided_device` say where the first answer
came from; `reminded_at`/`escalated_at` are claimed once by the scheduler.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import SerialId, UTCDateTime

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str, ondelete: str | None = "CASCADE") -> sa.Constraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def upgrade() -> None:
    with op.batch_alter_table("permissions") as batch:
        batch.add_column(sa.Column("decided_channel", sa.String(length=10), nullable=True))
        batch.add_column(sa.Column("decided_device", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("reminded_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("escalated_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("devices") as batch:
        batch.add_column(sa.Column("push_notice", sa.Text(), nullable=True))
    op.create_table(
        "push_subscriptions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("device_id", sa.String(length=36), nullable=False),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("p256dh", sa.String(length=200), nullable=False),
        sa.Column("auth", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_ok_at", UTCDateTime(), nullable=True),
        _fk("push_subscriptions", "device_id", "devices"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_subscriptions")),
        sa.UniqueConstraint("device_id", name=op.f("uq_push_subscriptions_device_id")),
    )
    op.create_table(
        "push_outbox",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("subscription_id", sa.String(length=36), nullable=False),
        sa.Column("request_id", sa.String(length=36), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", UTCDateTime(), nullable=False),
        sa.Column("claimed_until", UTCDateTime(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        _fk("push_outbox", "subscription_id", "push_subscriptions"),
        _fk("push_outbox", "request_id", "permissions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_outbox")),
    )
    op.create_index("ix_push_outbox_state_next_at", "push_outbox", ["state", "next_at"])
    op.create_index("ix_push_outbox_subscription_id", "push_outbox", ["subscription_id"])
    op.create_index("ix_push_outbox_request_id", "push_outbox", ["request_id"])
    op.create_table(
        "push_action_tokens",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=36), nullable=False),
        sa.Column("device_id", sa.String(length=36), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        _fk("push_action_tokens", "request_id", "permissions"),
        _fk("push_action_tokens", "device_id", "devices"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_action_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_push_action_tokens_token_hash")),
    )
    op.create_index("ix_push_action_tokens_request_id", "push_action_tokens", ["request_id"])
    op.create_index("ix_push_action_tokens_device_id", "push_action_tokens", ["device_id"])
    op.create_table(
        "request_deliveries",
        sa.Column("id", SerialId, autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=36), nullable=False),
        sa.Column("channel", sa.String(length=10), nullable=False),
        sa.Column("person", sa.String(length=200), nullable=True),
        sa.Column("device_id", sa.String(length=36), nullable=True),
        sa.Column("device_name", sa.String(length=200), nullable=True),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("latency_us", sa.Integer(), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        _fk("request_deliveries", "request_id", "permissions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_deliveries")),
    )
    op.create_index(
        "ix_request_deliveries_request_id_id", "request_deliveries", ["request_id", "id"]
    )
    op.create_table(
        "gateway_keys",
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("private_pem", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_gateway_keys")),
    )
    op.create_table(
        "notify_policies",
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("push", sa.Boolean(), nullable=False),
        sa.Column("email", sa.Boolean(), nullable=False),
        sa.Column("push_content", sa.String(length=10), nullable=False),
        sa.Column("skip_when_visible", sa.Boolean(), nullable=False),
        sa.Column("quiet_start", sa.String(length=5), nullable=True),
        sa.Column("quiet_end", sa.String(length=5), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("remind_after_min", sa.Integer(), nullable=True),
        sa.Column("escalate_after_min", sa.Integer(), nullable=True),
        sa.Column("visible_until", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        _fk("notify_policies", "user_id", "users"),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_notify_policies")),
    )


def downgrade() -> None:
    op.drop_table("notify_policies")
    op.drop_table("gateway_keys")
    op.drop_index("ix_request_deliveries_request_id_id", table_name="request_deliveries")
    op.drop_table("request_deliveries")
    op.drop_index("ix_push_action_tokens_device_id", table_name="push_action_tokens")
    op.drop_index("ix_push_action_tokens_request_id", table_name="push_action_tokens")
    op.drop_table("push_action_tokens")
    op.drop_index("ix_push_outbox_request_id", table_name="push_outbox")
    op.drop_index("ix_push_outbox_subscription_id", table_name="push_outbox")
    op.drop_index("ix_push_outbox_state_next_at", table_name="push_outbox")
    op.drop_table("push_outbox")
    op.drop_table("push_subscriptions")
    with op.batch_alter_table("devices") as batch:
        batch.drop_column("push_notice")
    with op.batch_alter_table("permissions") as batch:
        batch.drop_column("escalated_at")
        batch.drop_column("reminded_at")
        batch.drop_column("decided_device")
        batch.drop_column("decided_channel")
