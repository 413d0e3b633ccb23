"""PostgreSQL full-text search: a GIN index over to_tsvector(subject || body), accents folded

Runs only on PostgreSQL (SQLite has its FTS5 table since 0003). The index is an
expression index, not a column, so both databases keep the same `mails` columns
(tests/db/test_schema_parity.py); services/search.py queries the same expression.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 11:30:00
"""

from collections.abc import Sequence

from alembic import op

from mailui4agents.db import fts

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in fts.PG_CREATE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in fts.PG_DROP:
            op.execute(statement)
