"""default session keys without NUL: '["low","high","path"]' instead of NUL-separated

PostgreSQL text cannot hold NUL, so the key of a pair's default session becomes
a JSON list (services/sessions.default_session_key). Existing SQLite keys are
rewritten in place, so every pair keeps its default session.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 11:45:00
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_sessions = sa.table("sessions", sa.column("id", sa.String), sa.column("default_key", sa.Text))


def _rewrite(old_sep: bool) -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(_sessions.c.id, _sessions.c.default_key).where(
            _sessions.c.default_key.is_not(None)
        )
    ).all()
    for sid, key in rows:
        if old_sep:
            parts = key.split("\x00", 2)
            if len(parts) != 3:
                continue  # already new-style
            new = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
        else:
            if not key.startswith("["):
                continue
            new = "\x00".join(json.loads(key))
        bind.execute(sa.update(_sessions).where(_sessions.c.id == sid).values(default_key=new))


def upgrade() -> None:
    _rewrite(old_sep=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rewrite(old_sep=False)
