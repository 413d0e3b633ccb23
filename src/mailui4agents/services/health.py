"""Readiness: the database answers and its schema is at the newest migration."""

from __future__ import annotations

from mailui4agents.db import migrate
from mailui4agents.db.engine import Database
from mailui4agents.wire.models import ReadyOut


async def readiness(db: Database) -> ReadyOut:
    """`ready`, `migrating` (with both revisions) or `unavailable` (with why)."""
    try:
        current = await migrate.current_revision(db)
    except Exception as e:  # the database is unreachable: not ready, say why
        return ReadyOut(status="unavailable", error=str(e))
    head = migrate.head_revision()
    if current != head:
        return ReadyOut(status="migrating", revision=current, head=head)
    return ReadyOut(status="ready", revision=current)
