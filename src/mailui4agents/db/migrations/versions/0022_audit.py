"""Audit trail: every decision, append-only

Revision ID: 0022
Revises: 0020
Create Date: 2026-12-03 16:20:00.000000

`audit_decisions`: one row per decision on a tool call or a question — a
person's through any channel, a grant's, a rule's, the mode's, a timeout, the
terminal's, archiving (docs/audit.md; services/audit.py writes them). The
database itself refuses to change or delete a row: a trigger on each backend
aborts every UPDATE and DELETE (and TRUNCATE on PostgreSQL), so neither a route
nor a bug can rewrite the trail.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mailui4agents.db.types import UTCDateTime

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "audit_decisions is append-only: its rows are never changed or deleted"

_SQLITE = [
    f"""CREATE TRIGGER audit_decisions_no_{verb.lower()} BEFORE {verb} ON audit_decisions
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END"""
    for verb in ("UPDATE", "DELETE")
]
_POSTGRESQL = [
    f"""CREATE FUNCTION audit_decisions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '{APPEND_ONLY}' USING ERRCODE = 'insufficient_privilege'; END $$""",
    """CREATE TRIGGER audit_decisions_no_change BEFORE UPDATE OR DELETE ON audit_decisions
    FOR EACH ROW EXECUTE FUNCTION audit_decisions_append_only()""",
    """CREATE TRIGGER audit_decisions_no_truncate BEFORE TRUNCATE ON audit_decisions
    FOR EACH STATEMENT EXECUTE FUNCTION audit_decisions_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "audit_decisions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("asked_at", UTCDateTime(), nullable=False),
        sa.Column("request_id", sa.String(length=36), nullable=True),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("agent_name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("tool_name", sa.String(length=200), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("actor_kind", sa.String(length=10), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=True),
        sa.Column("channel", sa.String(length=10), nullable=True),
        sa.Column("device", sa.String(length=200), nullable=True),
        sa.Column("permission_mode", sa.String(length=20), nullable=True),
        sa.Column("enforcement", sa.String(length=20), nullable=True),
        sa.Column("waited_ms", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_decisions")),
    )
    for name, columns in (
        ("ix_audit_decisions_session_id_id", ["session_id", "id"]),
        ("ix_audit_decisions_agent_name_id", ["agent_name", "id"]),
        ("ix_audit_decisions_actor_id", ["actor", "id"]),
        ("ix_audit_decisions_at", ["at"]),
    ):
        op.create_index(name, "audit_decisions", columns)
    guards = _POSTGRESQL if op.get_bind().dialect.name == "postgresql" else _SQLITE
    for statement in guards:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TABLE audit_decisions")
        op.execute("DROP FUNCTION audit_decisions_append_only()")
        return
    op.drop_table("audit_decisions")  # its triggers go with it
