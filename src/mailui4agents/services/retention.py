"""Retention of the read log and of finished requests (docs/behaviour.md#live-events-sse).

Both sweeps delete in bounded batches, each in its own short write transaction,
so a backlog of months never holds the writer for long; what is left waits for
the next hourly sweep. Neither needs an index of its own:

- the read log is append-only and its ids grow with its times: the oldest rows
  are the lowest ids, so a batch is ``id < oldest + BATCH`` (a primary-key range)
  filtered by time;
- finished requests are found by ``(status, expires_at)``, the index the expiry
  pass already uses. A request is finished before it expires, so one whose
  ``expires_at`` is past the window finished before it too. Its deliveries,
  pushes and e-mail notices go with it (``ON DELETE CASCADE``); the audit log
  keeps its own copy of every decision (docs/audit.md), and the thread keeps
  the request's mail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PermissionRow, ReadLogRow

BATCH = 5000
FINISHED = ("approved", "denied", "expired", "cancelled")


@dataclass(frozen=True)
class Cutoffs:
    """The oldest time each kind keeps (None: kept forever)."""

    read_log: datetime | None
    requests: datetime | None

    @classmethod
    def of(cls, now: datetime, read_log_days: int, request_days: int) -> Cutoffs:
        return cls(
            now - timedelta(days=read_log_days) if read_log_days else None,
            now - timedelta(days=request_days) if request_days else None,
        )


async def read_log_due(s: AsyncSession, before: datetime) -> bool:
    oldest = await s.scalar(select(ReadLogRow.at).order_by(ReadLogRow.id).limit(1))
    return oldest is not None and oldest < before


async def sweep_read_log(s: AsyncSession, before: datetime) -> int:
    """Delete one batch of read-log rows older than `before`; how many."""
    first = await s.scalar(select(func.min(ReadLogRow.id)))
    if first is None:
        return 0
    gone = await s.execute(
        delete(ReadLogRow).where(ReadLogRow.id < first + BATCH, ReadLogRow.at < before)
    )
    return int(getattr(gone, "rowcount", 0) or 0)


def _finished_before(before: datetime) -> ColumnElement[bool]:
    return and_(PermissionRow.status.in_(FINISHED), PermissionRow.expires_at < before)


async def requests_due(s: AsyncSession, before: datetime) -> bool:
    found = await s.scalar(select(PermissionRow.id).where(_finished_before(before)).limit(1))
    return found is not None


async def sweep_requests(s: AsyncSession, before: datetime) -> int:
    """Delete one batch of requests finished and expired before `before`; how many."""
    batch = select(PermissionRow.id).where(_finished_before(before)).limit(BATCH)
    gone = await s.execute(
        delete(PermissionRow).where(PermissionRow.id.in_(batch.scalar_subquery()))
    )
    return int(getattr(gone, "rowcount", 0) or 0)
