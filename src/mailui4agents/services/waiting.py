""" "Waiting for you": an interactive agent tells its session's deciders that it
waits for their input, or for an answer in its terminal's permission dialog
(docs/platforms.md, "Interactive sessions"; POST
/api/v1/agent/sessions/{id}/waiting).

One notice per (session, kind, turn): the `waiting_notices` primary key makes a
repeat of the same turn's notice a no-op (`deduplicated`), on every replica. A
`permission` notice is skipped while the session has a pending request: the
request itself already reached the person (services/push.py). The notice takes
the path of a request's push: the deciders whom the notification policy says to
push now (services/notify_policy.first_push), each subscribed device, through
the push outbox, which records and counts every failure (services/push_send.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.reach_tables import WaitingNoticeRow
from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.errors import not_found
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.domain.masking import mask_text
from mailui4agents.services import access, notify_policy, push, push_send
from mailui4agents.services.principals import Principal

KINDS = ("input", "permission")
MAX_MESSAGE = 200  # characters of the platform's own notice
MAX_EXCERPT = 2000  # characters of the agent's last words the hook may send
MAX_TURN = 200
EXCERPT_LINES = 3  # the last lines of the agent's message shown
MAX_BODY = 300  # characters of the notification's body
KEEP_S = 86400.0  # a turn's key is swept after a day (services/scheduler.py)

_NOTICES = cast(Table, WaitingNoticeRow.__table__)

_WHAT = {"input": "your input", "permission": "your permission in the terminal"}


@dataclass(frozen=True)
class Waiting:
    deduplicated: bool
    pushed: int


def excerpt_tail(text: str) -> str:
    """The last EXCERPT_LINES non-empty lines of `text`, masked, at most MAX_BODY
    characters (its end kept: the last words are what the person needs)."""
    lines = [line.strip() for line in mask_text(text).splitlines() if line.strip()]
    tail = "\n".join(lines[-EXCERPT_LINES:])
    return tail if len(tail) <= MAX_BODY else "…" + tail[-(MAX_BODY - 1) :]


def place_of(session: SessionRow) -> str:
    """Where the agent works, in a word: its workspace's folder, else the alias."""
    return os.path.basename(session.workspace.rstrip("/")) or session.alias or "a terminal"


def payload(
    agent: str, session: SessionRow, kind: str, excerpt: str | None, policy: notify_policy.Policy
) -> JsonObject:
    if policy.push_content == "none":
        title, body = "An agent is waiting for you", "Open agentmail to see it."
    else:
        title = f"{agent} is waiting for {_WHAT[kind]} in {place_of(session)}"
        body = excerpt_tail(excerpt or "") or "Open the session to answer."
    return {
        "type": "waiting",
        "session_id": session.id,
        "title": title[:MAX_BODY],
        "body": body,
        "tag": f"waiting:{session.id}",
        "actions": [],
        "url": f"/sessions/{session.id}",
    }


async def _claim(s: AsyncSession, session_id: str, kind: str, turn: str, now: datetime) -> bool:
    """Write the notice's key; False when it was there already (a repeat)."""
    insert: Any = pg_insert if s.get_bind().dialect.name == "postgresql" else sqlite_insert
    stmt = (
        insert(_NOTICES)
        .values(session_id=session_id, kind=kind, turn=turn, pushed=0, created_at=now)
        .on_conflict_do_nothing(index_elements=["session_id", "kind", "turn"])
    )
    result = await s.execute(stmt)
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def _pending(s: AsyncSession, session_id: str) -> bool:
    found = await s.scalar(
        select(PermissionRow.id)
        .where(PermissionRow.session_id == session_id, PermissionRow.status == "pending")
        .limit(1)
    )
    return found is not None


async def notify(
    s: AsyncSession,
    agent: Principal,
    session_id: str,
    *,
    kind: str,
    excerpt: str | None,
    turn: str,
    now: datetime | None = None,
) -> Waiting:
    """Push the session's deciders that `agent` waits (in the caller's write
    transaction; sent after commit). NotFound unless `agent` takes part in the
    session."""
    now = now or utcnow()
    await access.reader(s, agent, session_id)  # NotFound for a session it is not in
    session = await s.get(SessionRow, session_id)
    if session is None:
        raise not_found(f"session '{session_id}'")
    if kind == "permission" and await _pending(s, session_id):
        return Waiting(deduplicated=True, pushed=0)
    if not await _claim(s, session_id, kind, turn, now):
        return Waiting(deduplicated=True, pushed=0)
    deciders = (await notify_policy.deciders_of(s, [session_id])).get(session_id, [])
    people = await notify_policy.first_push(s, session_id, [d.name for d in deciders], now)
    names = [name for name, policy in people.items() if policy.push]
    devices = await push.subscribed_devices(s, names, now)
    for device in devices:
        await push_send.enqueue(
            s,
            subscription_id=device.subscription_id,
            request_id=None,
            kind="waiting",
            payload=payload(agent.name, session, kind, excerpt, people[device.person]),
            person=device.person,
            device_id=device.device_id,
            device_name=device.device_name,
        )
    row = await s.get(WaitingNoticeRow, (session_id, kind, turn))
    if row is not None:
        row.pushed = len(devices)
    return Waiting(deduplicated=False, pushed=len(devices))


async def sweep(s: AsyncSession, now: datetime) -> int:
    """Delete the keys older than KEEP_S (the scheduler's sweep): a platform
    repeats a turn's notice within minutes, not days."""
    done = await s.execute(
        delete(WaitingNoticeRow).where(
            WaitingNoticeRow.created_at < now - timedelta(seconds=KEEP_S)
        )
    )
    return int(done.rowcount or 0)  # type: ignore[attr-defined]
