"""The durable event log. Events are rows written in the same transaction as the
change they announce, so an event exists if and only if its change committed.

Retention (docs/behaviour.md#live-events-sse): events older than
`event_retention_days` are compacted. The newest compacted row is kept as the
*floor* marker (principal `COMPACTED`, which no principal is spelt as): a stream
that resumes from below it may have missed events and is told so with `reset`.
The log's newest row is never compacted: SQLite would hand its id out again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import cast

from pydantic import BaseModel
from sqlalchemy import Table, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from mailui4agents.db.engine import InSession
from mailui4agents.db.tables import EventRow
from mailui4agents.db.types import utcnow
from mailui4agents.events.hub import LiveEvent, sse_data, sse_frame_of
from mailui4agents.wire.models import JsonObject, to_json

Payload = BaseModel | JsonObject
"""An event's data: its wire model (stored as that model's JSON), or JSON as is."""


def _json(data: Payload | None) -> JsonObject | None:
    return to_json(data) if isinstance(data, BaseModel) else data


_PG_EVENT_LOCK = 0x6D61696C  # any constant; serialises appends on PostgreSQL
# Every replica LISTENs here (events/pg_listen.py); the payload names the gateway
# that committed (`REPLICA`; empty from a process without a hub: the CLI), the
# log is the truth.
PG_CHANNEL = "agentmail_events"


async def take_event_lock(s: AsyncSession) -> None:
    """PostgreSQL: become the one appender until this transaction ends, and have
    every replica woken when it commits. A no-op on SQLite (one writer anyway).

    Ids must become visible in increasing order, or a reader that has seen id 10
    could miss an id 9 committed later: the sequence is drawn under this lock,
    and PostgreSQL makes a commit visible before it releases the lock. The lock
    and the NOTIFY are one statement (one round trip): a NOTIFY is delivered at
    commit only, so which of the two runs first does not matter."""
    if s.get_bind().dialect.name == "postgresql" and not s.info.get("event_lock"):
        await s.run_sync(take_event_lock_in)


def take_event_lock_in(s: Session) -> None:
    """take_event_lock in a sync session (inside AsyncSession.run_sync)."""
    if s.get_bind().dialect.name == "postgresql" and not s.info.get("event_lock"):
        payload = s.info.get(REPLICA, "")
        s.execute(_LOCK_AND_NOTIFY, {"k": _PG_EVENT_LOCK, "c": PG_CHANNEL, "p": payload})
        s.info["event_lock"] = True


_LOCK_AND_NOTIFY = text("SELECT pg_advisory_xact_lock(:k), pg_notify(:c, :p)")
_EVENTS = cast(Table, EventRow.__table__)
# A Core insert of the table, built once: the ORM's unit of work flushed events
# one INSERT … RETURNING each on SQLite, and building the statement cost more CPU
# than running it. Its RETURNING gives the ids to hand to the hub after the
# commit (events/hub.py, `publish`), in the same statement: SQLAlchemy's
# "insertmanyvalues" sends the rows as one multi-row INSERT. SQLite assigns the
# ids in the order of the rows (one writer; rowid = newest + 1, row by row) but
# may return them in any order: they are sorted. PostgreSQL returns them in the
# order of the rows with `sort_by_parameter_order` (still one statement: an
# INSERT … SELECT ordered by the rows' positions).
_INSERT_EVENTS = insert(_EVENTS).returning(_EVENTS.c.id)
_INSERT_EVENTS_IN_ORDER = insert(_EVENTS).returning(_EVENTS.c.id, sort_by_parameter_order=True)
# With no stream open the ids are of no use, and RETURNING's rows cost CPU (about
# 30 us a send): the rows go in as before, ids unknown (PostgreSQL: no RETURNING).
_INSERT_EVENTS_BLIND = insert(_EVENTS).inline()

Event = tuple[str, str, Payload | None]
"""(principal, type, data) of one event to append."""

LISTENING = "streams_open"
"""`s.info` key, set by state.Gateway.write: a stream was open when the
transaction began, so its rows are kept for the hub (else nothing is kept and a
stream opened since reads the log)."""

REPLICA = "replica"
"""`s.info` key, set by state.Gateway.write: the gateway's name (EventHub.replica),
sent as the NOTIFY's payload so that its own listener skips the commits its hub
was already handed in-process (events/pg_listen.py)."""

PUBLISHED = "published"
"""`s.info` key: the rows this transaction appended, in id order, for the hub
once it commits (`live_events`, state.Gateway.write); None when they cannot be
handed out as they are (then the hub reads the log)."""


async def append(
    s: AsyncSession, principals: Iterable[str], type_: str, data: Payload | None
) -> None:
    """Add one event per principal, in one statement; they are notified after the commit."""
    await append_rows(s, [(p, type_, data) for p in principals])


@InSession
def append_rows(s: Session, events: Sequence[Event]) -> None:
    """Append `events` in this order (ids increase along the list), in one statement
    whatever their types; their principals are notified after the commit, and the
    rows, with their ids, are kept in `s.info[PUBLISHED]` for the hub. Every
    append is this one immediate statement (no ORM-pending event rows), so ids
    follow the order of the calls. Nothing is appended for an empty list (the
    PostgreSQL lock is taken all the same). Awaited with an AsyncSession, or
    `append_rows.sync` in the greenlet of another InSession (services/delivery.py)."""
    take_event_lock_in(s)
    if not events:
        return
    now = utcnow()
    # One payload is often every recipient's (a decision to the agent and each
    # decider): dumped to JSON once, by identity (`events` keeps each alive).
    dumped: dict[int, JsonObject | None] = {}
    rows = []
    for p, t, d in events:
        if id(d) not in dumped:
            dumped[id(d)] = _json(d)
        rows.append({"principal": p, "type": t, "data": dumped[id(d)], "created_at": now})
    s.info.setdefault("notify", set()).update(p for p, _, _ in events)
    # Counted once committed (metrics.note; Gateway.write): one entry per event.
    s.info.setdefault("metrics", []).extend(("events", str(t), 1.0) for _, t, _ in events)
    conn = s.connection()
    if not s.info.get(LISTENING) or s.info.get(PUBLISHED, []) is None:
        s.info[PUBLISHED] = None
        conn.execute(_INSERT_EVENTS_BLIND, rows)
        return
    postgresql = conn.dialect.name == "postgresql"
    # One row (most appends) as a plain execute: insertmanyvalues' batching of a
    # list costs more CPU than the statement.
    result = conn.execute(
        _INSERT_EVENTS_IN_ORDER if postgresql else _INSERT_EVENTS,
        rows[0] if len(rows) == 1 else rows,
    )
    ids = [int(i) for i in result.scalars()]
    _publish(s, events, ids if postgresql else sorted(ids), dumped)


def _publish(
    s: Session,
    events: Sequence[Event],
    ids: list[int],
    dumped: dict[int, JsonObject | None],
) -> None:
    """Keep this append's rows for the hub, or give up on handing out this
    transaction's rows (None: the hub reads them from the log)."""
    published: list[Appended] | None = s.info.get(PUBLISHED, [])
    if published is None:
        return
    if (
        s.in_nested_transaction()
        or len(ids) != len(events)
        or ids != list(range(ids[0], ids[0] + len(ids)))
    ):
        # A savepoint may yet be rolled back (its rows gone, their ids handed out
        # again by SQLite): only the log knows what committed. And ids that do
        # not run on one by one cannot be matched to the rows with certainty.
        s.info[PUBLISHED] = None
        return
    # Each payload encoded now, as it was written (a caller may change its dict
    # later), the way the read path encodes the data it reads back (events/hub.py,
    # `sse_frame`), once for all the rows that share it.
    payloads: dict[int, str] = {}
    for _, _, d in events:
        if id(d) not in payloads:
            payloads[id(d)] = sse_data(dumped[id(d)])
    published.append((ids[0], [(p, t, payloads[id(d)]) for p, t, d in events]))
    s.info[PUBLISHED] = published


Appended = tuple[int, list[tuple[str, str, str]]]
"""One append_rows call as kept for the hub: its first id (the others follow one
by one) and each row's principal, type and data as its SSE `data:` line."""


def live_events(published: Sequence[Appended]) -> list[LiveEvent]:
    """The rows a transaction appended as the hub hands them out, each frame what
    the read path makes of the row. Built after the commit, and only when a
    stream is open (state.Gateway.write)."""
    return [
        LiveEvent(event_id, p, sse_frame_of(event_id, t, payload))
        for first, rows in published
        for event_id, (p, t, payload) in enumerate(rows, first)
    ]


async def since(s: AsyncSession, principal: str, after: int, limit: int) -> list[EventRow]:
    rows = await s.scalars(
        select(EventRow)
        .where(EventRow.principal == principal, EventRow.id > after)
        .order_by(EventRow.id)
        .limit(limit)
    )
    return list(rows.all())


async def last_id(s: AsyncSession) -> int:
    """The newest event id of the whole log (0 when empty)."""
    return int(await s.scalar(select(func.coalesce(func.max(EventRow.id), 0))) or 0)


async def after_all(s: AsyncSession, after: int, limit: int) -> list[LiveEvent]:
    """Every principal's events after `after`, oldest first: the hub's one read per
    commit (events/hub.py), fanned out in memory."""
    rows = await s.execute(
        select(EventRow.id, EventRow.principal, EventRow.type, EventRow.data)
        .where(EventRow.id > after)
        .order_by(EventRow.id)
        .limit(limit)
    )
    return [LiveEvent.of(int(r.id), r.principal, r.type, r.data) for r in rows]


COMPACTED = "~compacted"
COMPACT_BATCH = 5000  # rows read per step of the walk
COMPACT_MOST = 50_000  # rows one compaction deletes: one transaction holds the writer briefly


async def floor(s: AsyncSession) -> int:
    """The newest compacted event id (0 when nothing was): a stream that resumes
    from below it may have missed events. One look-up on the principal index."""
    found = await s.scalar(select(func.max(EventRow.id)).where(EventRow.principal == COMPACTED))
    return int(found or 0)


async def compaction_point(s: AsyncSession, before: datetime) -> int:
    """The newest event id created before `before`, never the log's newest row, at
    most COMPACT_MOST rows above the floor (0: nothing to compact). Ids grow with
    time (appends are serialised), so it is found by walking up from the floor,
    not by a scan of the whole log; a longer backlog takes several compactions."""
    newest = await last_id(s)
    point, after = 0, await floor(s)
    start = after
    while after - start < COMPACT_MOST:
        rows = (
            await s.execute(
                select(EventRow.id, EventRow.created_at)
                .where(EventRow.id > after, EventRow.id < newest)
                .order_by(EventRow.id)
                .limit(COMPACT_BATCH)
            )
        ).all()
        for event_id, created_at in rows:
            if created_at >= before:
                return point
            point = int(event_id)
        if len(rows) < COMPACT_BATCH:
            return point
        after = int(rows[-1][0])
    return point


async def compact(s: AsyncSession, through: int) -> int:
    """Delete the events below `through` and make `through` the floor marker; the
    number of rows deleted. A no-op when `through` is not above the floor."""
    old = await floor(s)
    if through <= old:
        return 0
    gone = await s.execute(delete(EventRow).where(EventRow.id < through))
    await s.execute(
        update(EventRow)
        .where(EventRow.id == through)
        .values(principal=COMPACTED, type="compacted", data={})
    )
    return int(getattr(gone, "rowcount", 0) or 0)
