"""session deciders and agent owners

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 08:30:00

Existing sessions get as owners the humans on their first mail (its human sender
and human `to` recipients), the rule new sessions follow. Existing agents get every
admin as owner: who created them was not recorded.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_deciders",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("added_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_deciders_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "name", name=op.f("pk_session_deciders")),
    )
    op.create_index("ix_session_deciders_name", "session_deciders", ["name"], unique=False)
    op.create_table(
        "agent_owners",
        sa.Column("agent_id", sa.String(length=36), nullable=False),
        sa.Column("username", sa.String(length=200), nullable=False),
        sa.Column("added_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_owners_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "username", name=op.f("pk_agent_owners")),
    )
    op.create_index("ix_agent_owners_username", "agent_owners", ["username"], unique=False)
    _backfill()


def _backfill() -> None:
    # The first mail of each session: the smallest seq.
    first = "(SELECT session_id, MIN(seq) AS seq FROM mails GROUP BY session_id)"
    op.execute(
        "INSERT INTO session_deciders (session_id, name, role, added_by, created_at) "
        f"SELECT m.session_id, m.from_name, 'owner', 'migration', m.created_at "
        f"FROM mails m JOIN {first} f ON f.seq = m.seq WHERE m.from_human"
    )
    op.execute(
        "INSERT INTO session_deciders (session_id, name, role, added_by, created_at) "
        f"SELECT DISTINCT m.session_id, r.name, 'owner', 'migration', m.created_at "
        f"FROM mails m JOIN {first} f ON f.seq = m.seq "
        "JOIN mail_recipients r ON r.mail_seq = m.seq "
        "WHERE r.is_human AND r.role = 'to' AND r.name <> m.from_name"
    )
    op.execute(
        "INSERT INTO agent_owners (agent_id, username, added_by, created_at) "
        "SELECT a.id, u.username, 'migration', a.created_at FROM agents a, users u "
        "WHERE u.is_admin"
    )


def downgrade() -> None:
    op.drop_index("ix_agent_owners_username", table_name="agent_owners")
    op.drop_table("agent_owners")
    op.drop_index("ix_session_deciders_name", table_name="session_deciders")
    op.drop_table("session_deciders")
