"""Rules before the human: rules, built-in rule switches, accepted rule files

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 16:30:00.000000

`rules`: allow/deny/ask rules that decide a permission request before anyone is
asked (docs/rules.md). `builtin_rule_switches`: the built-in deny rules an
admin switched off (no row: on). `rule_files`: the content of a workspace's
`.agentmail/rules.toml` a person accepted, by its SHA-256.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rules",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("effect", sa.String(length=10), nullable=False),
        sa.Column("tool_name", sa.String(length=200), nullable=False),
        sa.Column("pattern", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(length=10), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("file_sha256", sa.String(length=64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rules_tool_name_scope", "rules", ["tool_name", "scope"])
    op.create_index("ix_rules_session_id", "rules", ["session_id"])
    op.create_index("ix_rules_workspace", "rules", ["workspace"])
    op.create_index("ix_rules_author", "rules", ["author"])
    op.create_table(
        "builtin_rule_switches",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("changed_by", sa.String(length=200), nullable=False),
        sa.Column("changed_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "rule_files",
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("accepted_by", sa.String(length=200), nullable=False),
        sa.Column("accepted_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("workspace"),
    )


def downgrade() -> None:
    op.drop_table("rule_files")
    op.drop_table("builtin_rule_switches")
    op.drop_index("ix_rules_author", table_name="rules")
    op.drop_index("ix_rules_workspace", table_name="rules")
    op.drop_index("ix_rules_session_id", table_name="rules")
    op.drop_index("ix_rules_tool_name_scope", table_name="rules")
    op.drop_table("rules")
