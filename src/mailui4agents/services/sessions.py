"""Sessions: routing a mail to its session, aliases, rate limits, updates."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.base import new_id
from mailui4agents.db.tables import MailRow, RecipientRow, SessionDeciderRow, SessionRow
from mailui4agents.db.types import utcnow
from mailui4agents.domain.addresses import NEW_SESSION, Address, is_valid_alias
from mailui4agents.domain.aliases import alias_candidates, auto_alias, close_matches
from mailui4agents.domain.errors import (
    NotFound,
    RateLimited,
    conflict,
    forbidden,
    invalid_value,
)
from mailui4agents.events import log
from mailui4agents.services import access, identity, permissions, tasking
from mailui4agents.services.principals import Principal
from mailui4agents.services.session_summary import audience, describe, describe_many, get_session
from mailui4agents.settings import Settings
from mailui4agents.wire.events import EventType
from mailui4agents.wire.models import DeciderOut, SessionOut


async def check_rate_limit(s: AsyncSession, settings: Settings, creator: str) -> None:
    """A runaway agent must not create thousands of sessions."""
    since = utcnow() - timedelta(seconds=settings.session_rate_window_s)
    recent = (
        await s.scalars(
            select(SessionRow.created_at)
            .where(SessionRow.created_by == creator, SessionRow.created_at > since)
            .order_by(SessionRow.created_at)
        )
    ).all()
    if len(recent) >= settings.session_rate_limit:
        oldest = recent[len(recent) - settings.session_rate_limit]
        wait = oldest + timedelta(seconds=settings.session_rate_window_s) - utcnow()
        retry = max(1, int(wait.total_seconds() + 0.999))
        raise RateLimited(
            f"'{creator}' created {len(recent)} sessions in the last "
            f"{settings.session_rate_window_s:g} s; try again in {retry} s",
            retry_after=retry,
        )


def default_session_key(low: str, high: str, path: str) -> str:
    """The unique key of a pair's default session at `path`: a JSON list, which no
    name or path can make ambiguous (PostgreSQL text cannot hold the NUL that
    separated the parts before migration 0010)."""
    return json.dumps([low, high, path], ensure_ascii=False, separators=(",", ":"))


async def _assign_alias(s: AsyncSession, row: SessionRow, base: str) -> None:
    """Give the session its first free candidate alias with a conditional write
    (only while still empty), so concurrent first mails cannot name it twice."""
    candidates = alias_candidates(base, row.id)
    taken = set(
        (
            await s.scalars(
                select(SessionRow.alias).where(
                    SessionRow.workspace == row.workspace, SessionRow.alias.in_(candidates)
                )
            )
        ).all()
    )
    for alias in candidates:
        if alias in taken:
            continue
        try:
            async with s.begin_nested():
                result = await s.execute(
                    update(SessionRow)
                    .where(SessionRow.id == row.id, SessionRow.alias.is_(None))
                    .values(alias=alias)
                    .execution_options(synchronize_session=False)
                )
        except IntegrityError:
            continue  # taken by a concurrent writer (PostgreSQL); try the next
        if result.rowcount:  # type: ignore[attr-defined]
            row.alias = alias
        else:
            await s.refresh(row, ["alias"])
        return
    raise conflict("no free alias for this session")  # pragma: no cover


async def create_session(
    s: AsyncSession,
    settings: Settings,
    creator: str,
    workspace: str,
    alias_base: str,
    *,
    permission_mode: str | None = None,
    default_key: str | None = None,
    enforcement: str = "advisory",
) -> SessionRow:
    await check_rate_limit(s, settings, creator)
    row = SessionRow(
        permission_enforcement=enforcement,
        id=new_id(),
        workspace=workspace,
        created_by=creator,
        default_key=default_key,
        hop_limit=settings.default_hop_limit,
        permission_mode=permission_mode or "workspace",
    )
    s.add(row)
    await s.flush()
    await _assign_alias(s, row, alias_base)
    return row


async def _enforcement_of(s: AsyncSession, name: str) -> str:
    """The enforcement an agent last reported (advisory for humans/unknown)."""
    from mailui4agents.db.tables import AgentRow

    value = await s.scalar(select(AgentRow.mode_enforcement).where(AgentRow.name == name))
    return value or "advisory"


async def refresh_enforcement(s: AsyncSession, agent: str, enforcement: str) -> None:
    """An agent reported a new enforcement level: update the snapshot of its active
    sessions and tell their participants (the UI shows it beside the mode)."""
    mine = (
        select(MailRow.session_id)
        .join(RecipientRow, RecipientRow.mail_seq == MailRow.seq)
        .where(RecipientRow.name == agent)
    )
    rows = (
        await s.scalars(
            select(SessionRow).where(
                SessionRow.id.in_(mine),
                SessionRow.status == "active",
                SessionRow.permission_enforcement != enforcement,
            )
        )
    ).all()
    for row in rows:
        row.permission_enforcement = enforcement
        await s.flush()
        out = await describe(s, row, agent)
        await log.append(s, await audience(s, row.id), EventType.SESSION_UPDATE, out)


async def by_alias(s: AsyncSession, workspace: str, alias: str, sender: Principal) -> SessionRow:
    """The session `alias` names in `workspace` — if the sender takes part in it.

    Aliases are guessable from subjects; letting anyone post into a session by its
    alias would make them a participant who can read its whole history. To an
    outsider a session they are not in looks exactly like one that does not exist
    (close matches come only from their own sessions)."""
    row = await find_alias(s, workspace, alias, sender)
    if row is None:
        raise await alias_not_found(s, workspace, alias, sender)
    return row


async def find_alias(
    s: AsyncSession, workspace: str, alias: str, sender: Principal
) -> SessionRow | None:
    row = await s.scalar(
        select(SessionRow).where(SessionRow.workspace == workspace, SessionRow.alias == alias)
    )
    if row is not None and not await access.Reader(sender).may_post(s, row):
        return None
    return row


async def alias_not_found(
    s: AsyncSession, workspace: str, alias: str, sender: Principal
) -> NotFound:
    known = (
        await s.scalars(
            select(SessionRow.alias).where(
                SessionRow.workspace == workspace,
                SessionRow.id.in_(access.sessions_of(sender.name)),
            )
        )
    ).all()
    return NotFound(
        f"session '{alias}'",
        message=f"no session '{alias}' in workspace '{workspace}'",
        field="to",
        close_matches=close_matches(alias, [a for a in known if a]),
    )


async def adopt(
    s: AsyncSession, settings: Settings, sender: Principal, agent: str, workspace: str, slug: str
) -> tuple[SessionRow, str | None] | None:
    """Adopt the agent's platform session `slug` whose cwd is `workspace`
    (docs/behaviour.md#adoption-of-platform-sessions).

    The workspace must match exactly — another path would drop mail into another
    project's conversation. Once only; counts toward the session rate limit (it
    creates a session). Returns the new session and the platform title (the
    default subject), or None when nothing is adoptable."""
    from mailui4agents.db.tables import PlatformSessionRow

    if not await access.Reader(sender).can_adopt(s, agent):
        return None  # to anyone else it is an unknown alias: nothing is revealed
    found = await s.scalar(
        select(PlatformSessionRow).where(
            PlatformSessionRow.agent_name == agent,
            PlatformSessionRow.slug == slug,
            PlatformSessionRow.cwd == workspace,
            PlatformSessionRow.adopted_session_id.is_(None),
        )
    )
    if found is None:
        return None
    row = await create_session(
        s, settings, sender.name, workspace, slug, enforcement=await _enforcement_of(s, agent)
    )
    row.platform_id = found.platform_id
    claimed = await s.execute(
        update(PlatformSessionRow)
        .where(PlatformSessionRow.id == found.id, PlatformSessionRow.adopted_session_id.is_(None))
        .values(adopted_session_id=row.id)
        .execution_options(synchronize_session=False)
    )
    if not claimed.rowcount:  # type: ignore[attr-defined]
        raise conflict(f"platform session '{slug}' was adopted meanwhile; send again")
    await s.flush()
    return row, found.title


# The default session of a pair of people and a path (most sends without a
# parent land here): built once, not per send.
_DEFAULT_SESSION = select(SessionRow).where(SessionRow.default_key == bindparam("b_key"))


async def resolve_target(
    s: AsyncSession,
    settings: Settings,
    sender: Principal,
    to: list[Address],
    cc: list[Address],
    subject: str,
    parent_session: SessionRow | None,
    permission_mode: str | None,
) -> tuple[SessionRow, bool, str]:
    """Find or create the session a mail goes to (a reply's: `parent_session`).

    Returns (session, created, subject): the subject defaults to the platform
    session's title when the mail adopts one and has none of its own."""
    explicit = [(f, a) for f, addrs in (("to", to), ("cc", cc)) for a in addrs if a.session]
    created = False
    target_subject = subject
    adopted_slug: str | None = None
    if parent_session is not None:
        session = parent_session
    else:
        primary = next((a for f, a in explicit if f == "to"), None)
        if primary is not None and primary.session == NEW_SESSION:
            base = auto_alias(primary.name, subject)
            session = await create_session(
                s,
                settings,
                sender.name,
                primary.path,
                base,
                permission_mode=permission_mode,
                enforcement=await _enforcement_of(s, primary.name),
            )
            created = True
        elif primary is not None:
            alias = str(primary.session)
            found = await find_alias(s, primary.path, alias, sender)
            if found is None:
                adopted = await adopt(s, settings, sender, primary.name, primary.path, alias)
                if adopted is None:
                    raise await alias_not_found(s, primary.path, alias, sender)
                found, title = adopted
                created, adopted_slug = True, alias
                if not subject.strip() and title:
                    target_subject = title
            session = found
        else:
            first = to[0]
            # One default session per PAIR of people and path: ana↔claude share one,
            # bob mailing claude@/srv/shop gets his own (never ana's history).
            low, high = sorted((sender.name, first.name))
            key = default_session_key(low, high, first.path)
            found = await s.scalar(_DEFAULT_SESSION, {"b_key": key})
            if found is None:
                base = auto_alias(first.name, subject)
                session = await create_session(
                    s,
                    settings,
                    sender.name,
                    first.path,
                    base,
                    permission_mode=permission_mode,
                    default_key=key,
                    enforcement=await _enforcement_of(s, first.name),
                )
                created = True
            else:
                session = found
    for field, addr in explicit:
        same = addr.path == session.workspace and (
            addr.session == session.alias
            or (created and addr.session in (NEW_SESSION, adopted_slug))
        )
        if not same:
            raise invalid_value(
                field,
                f"'{addr.name}@{addr.path}.{addr.session}' names another session than this "
                f"mail goes to ({session.alias}); send separate mails to separate sessions",
            )
    if permission_mode is not None and not created:
        raise invalid_value(
            "permission_mode",
            "permission_mode applies only to a mail that creates a session; "
            "change an existing session's mode by updating the session",
        )
    if session.status == "archived":
        raise conflict(f"session '{session.alias}' is archived; unarchive it to continue")
    return session, created, target_subject


async def list_sessions(
    s: AsyncSession,
    who: Principal,
    status: str | None,
    workspace: str | None,
    q: str | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[SessionOut], str | None]:
    stmt = select(SessionRow).where(SessionRow.id.in_(access.Reader(who).readable_ids()))
    if status:
        stmt = stmt.where(SessionRow.status == status)
    if workspace is not None:
        stmt = stmt.where(SessionRow.workspace == workspace)
    if q:
        stmt = stmt.where(SessionRow.alias.contains(q, autoescape=True))
    # Newest activity first; cursor is "<created_at iso>|<id>" of the last row.
    stmt = stmt.order_by(SessionRow.created_at.desc(), SessionRow.id.desc())
    if cursor:
        try:
            when, sid = cursor.split("|", 1)
            from datetime import datetime

            at = datetime.fromisoformat(when)
        except ValueError:
            raise invalid_value("cursor", "cursor is not one this server gave out") from None
        stmt = stmt.where(
            or_(SessionRow.created_at < at, (SessionRow.created_at == at) & (SessionRow.id < sid))
        )
    rows = list((await s.scalars(stmt.limit(limit + 1))).all())
    more = len(rows) > limit
    rows = rows[:limit]
    items = await describe_many(s, rows, who.name)
    next_cursor = f"{rows[-1].created_at.isoformat()}|{rows[-1].id}" if more and rows else None
    return items, next_cursor


async def show_session(s: AsyncSession, who: Principal, session_id: str) -> SessionOut:
    """One session, for anyone who may read it."""
    row = await get_session(s, session_id)
    await access.Reader(who).ensure_read(s, row, f"session '{session_id}'")
    return await describe(s, row, who.name)


async def show_session_and_power(
    s: AsyncSession, who: Principal, session_id: str
) -> tuple[SessionOut, bool]:
    """show_session, and whether `who` may decide in it (the web thread page
    shows its controls to deciders only)."""
    row = await get_session(s, session_id)
    reader = access.Reader(who)
    await reader.ensure_read(s, row, f"session '{session_id}'")
    return await describe(s, row, who.name), await reader.can_decide(s, row)


async def update_session(
    s: AsyncSession,
    who: Principal,
    session_id: str,
    alias: str | None,
    permission_mode: str | None,
    archived: bool | None,
) -> SessionOut:
    """Rename, change the mode, archive (which cancels every pending request):
    for the session's deciders only."""
    row = await get_session(s, session_id)
    # An outsider learns nothing, not even that it exists (NotFound); a reader
    # without the power is told why (Forbidden).
    await access.Reader(who).ensure_decide(s, row, f"session '{session_id}'")
    if alias is not None and alias != row.alias:
        if not is_valid_alias(alias):
            raise invalid_value(
                "alias", "an alias is 1-64 characters without '.', '@' or spaces, not 'new'"
            )
        clash = await s.scalar(
            select(SessionRow.id).where(
                SessionRow.workspace == row.workspace, SessionRow.alias == alias
            )
        )
        if clash is not None:
            raise conflict(f"alias '{alias}' is already used in workspace '{row.workspace}'")
        row.alias = alias
        row.alias_manual = True  # a human's name is never overwritten by automation
    if alias is not None and alias == row.proposed_alias:
        row.proposed_alias = row.proposed_by = None  # the proposal is settled
    if permission_mode is not None:
        await tasking.check_mode_change(s, who, row, permission_mode)
        row.permission_mode = permission_mode
    if archived is not None:
        row.status = "archived" if archived else "active"
    await s.flush()
    if archived:
        # Nothing stays pending in an archived session: its waiters are told now,
        # before the session_update below counts what is still pending.
        await permissions.cancel_pending(s, row.id, who.name)
    out = await describe(s, row, who.name)
    await log.append(s, await audience(s, row.id), EventType.SESSION_UPDATE, out)
    return out


async def propose_alias(
    s: AsyncSession, agent: Principal, session_id: str, alias: str
) -> SessionOut:
    """An agent in the session suggests a name; the session keeps its alias until a
    decider accepts (docs/behaviour.md). A later proposal replaces an earlier one."""
    row = await get_session(s, session_id)
    await access.reader(s, agent, session_id)  # NotFound unless the agent takes part
    if not is_valid_alias(alias):
        raise invalid_value(
            "alias", "an alias is 1-64 characters without '.', '@' or spaces, not 'new'"
        )
    if alias != row.alias:
        row.proposed_alias, row.proposed_by = alias, agent.name
        await s.flush()
    out = await describe(s, row, agent.name)
    await log.append(s, await audience(s, row.id), EventType.SESSION_UPDATE, out)
    return out


async def accept_proposed_alias(s: AsyncSession, who: Principal, session_id: str) -> SessionOut:
    """A decider makes the proposed alias the session's (a manual alias from then on)."""
    row = await get_session(s, session_id)
    await access.Reader(who).ensure_decide(s, row, f"session '{session_id}'")
    if row.proposed_alias is None:
        raise conflict(f"session '{row.alias}' has no proposed alias")
    return await update_session(s, who, session_id, row.proposed_alias, None, None)


def decider_out(row: SessionDeciderRow) -> DeciderOut:
    return DeciderOut(
        name=row.name, role=row.role, added_by=row.added_by, created_at=row.created_at
    )


async def list_deciders(s: AsyncSession, who: Principal, session_id: str) -> list[DeciderOut]:
    """Who decides in the session: for anyone who may read it."""
    row = await get_session(s, session_id)
    await access.Reader(who).ensure_read(s, row, f"session '{session_id}'")
    return [decider_out(d) for d in await access.decider_rows(s, row.id)]


async def change_deciders(
    s: AsyncSession, who: Principal, session_id: str, *, add: str | None, remove: str | None
) -> list[DeciderOut]:
    """An owner adds or removes a decider (owners alone: a decider cannot name
    more deciders, or power would spread by itself)."""
    row = await get_session(s, session_id)
    reader = access.Reader(who)
    await reader.ensure_read(s, row, f"session '{session_id}'")
    if not await reader.is_owner(s, row):
        raise forbidden("only the session's owners may add or remove deciders")
    if add is not None:
        if await identity.kind_of(s, add) != "user":
            raise invalid_value("name", f"no user is named '{add}' (deciders are people)")
        await access.add_decider(s, row, add, who)
    if remove is not None:
        await access.remove_decider(s, row, remove)
    await s.flush()
    out = await describe(s, row, who.name)
    await log.append(s, await audience(s, row.id), EventType.SESSION_UPDATE, out)
    return [decider_out(d) for d in await access.decider_rows(s, row.id)]
