"""taskers, workspace roots and mode ceilings per agent; what a grant covers

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 05:00:00.000000

Any account could mail any agent to any folder in `full` mode, and so run any
command on a bridge's machine (docs/access.md, "Who may set an agent to work").
An agent now has taskers (its owners, plus agent_taskers), workspace roots set by
its owners, and a highest mode per kind of person.

Existing agents get their owners as taskers (owners always are; nobody else is
added) and no workspace roots: `agents.workspaces` is what the agent itself last
reported, which must never become a permission. An owner sets the roots
(`agentmail agent set NAME --workspace GLOB`) before the agent works again.

Grants gain `scope`: an existing pattern-less grant keeps its meaning ("every"
input of its tool); one with a pattern stays a prefix.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(
            sa.Column("workspace_roots", sa.JSON(), nullable=False, server_default="[]")
        )
        batch.add_column(
            sa.Column("max_mode_owners", sa.String(20), nullable=False, server_default="full")
        )
        batch.add_column(
            sa.Column("max_mode_taskers", sa.String(20), nullable=False, server_default="workspace")
        )
    op.create_table(
        "agent_taskers",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("username", sa.String(length=200), nullable=False),
        sa.Column("added_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_taskers_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "username", name=op.f("pk_agent_taskers")),
    )
    op.create_index("ix_agent_taskers_username", "agent_taskers", ["username"], unique=False)
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("scope", sa.String(10), nullable=False, server_default="prefix"))
    op.execute("UPDATE grants SET scope = 'every' WHERE pattern IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.drop_column("scope")
    op.drop_index("ix_agent_taskers_username", table_name="agent_taskers")
    op.drop_table("agent_taskers")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("max_mode_taskers")
        batch.drop_column("max_mode_owners")
        batch.drop_column("workspace_roots")
