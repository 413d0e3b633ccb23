"""Who may set an agent to work, where, and how freely: the rules of
domain/tasking.py applied to a mail, a mode change and an interactive session,
and the use cases that change an agent's taskers, roots and ceilings
(docs/access.md, "Who may set an agent to work")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import (
    AgentOwnerRow,
    AgentRow,
    AgentTaskerRow,
    MailRow,
    SessionDeciderRow,
    SessionRow,
    UserRow,
)
from mailui4agents.domain.addresses import NEW_SESSION, Address
from mailui4agents.domain.errors import Conflict, Forbidden, invalid_value, not_found
from mailui4agents.domain.mail_types import MailType, Recipient, Role
from mailui4agents.domain.modes import MODES, Mode, mode_for_deciding
from mailui4agents.domain.roots import RootError, normalise_root, normalise_roots
from mailui4agents.domain.tasking import (
    NO_TURN_TYPES,
    OWNER,
    TASKER,
    AgentPolicy,
    Refusal,
    asks_too_much,
    change_refusal,
    lowest,
    mode_refusal,
    rank,
    start_mode,
    tasking_ceiling,
    workspace_refusal,
)
from mailui4agents.services import access
from mailui4agents.services.principals import Principal
from mailui4agents.wire.models import MaxModeOut, TaskerOut


def refuse(r: Refusal) -> Forbidden:
    return Forbidden(r.message, code=r.code, field=r.field)


def _policies(
    match: Callable[[Any, str], ColumnElement[bool]],
) -> Select[str, list[str], str, str, str, str]:
    """The policies of some agents with the roles of some people, each list
    matched by `match(column, parameter name)`: two joins, no union."""
    return (
        select(
            AgentRow.name,
            AgentRow.workspace_roots,
            AgentRow.max_mode_owners,
            AgentRow.max_mode_taskers,
            AgentOwnerRow.username,
            AgentTaskerRow.username,
        )
        .outerjoin(
            AgentOwnerRow,
            and_(AgentOwnerRow.agent_id == AgentRow.id, match(AgentOwnerRow.username, "who")),
        )
        .outerjoin(
            AgentTaskerRow,
            and_(AgentTaskerRow.agent_id == AgentRow.id, match(AgentTaskerRow.username, "who_t")),
        )
        .where(match(AgentRow.name, "names"))
    )


# Built once at import (every send to an agent runs one; building it per call —
# the IN lists, the joins, their cache key — was a fifth of a send's event-loop
# time in bench/delivery.py's profile). Lists of any length use expanding IN
# parameters, which SQLAlchemy rewrites into the SQL at every execution; one
# agent and one person (most sends) compare with `=` and skip that.
_POLICIES = _policies(lambda column, name: column.in_(bindparam(name, expanding=True)))
_POLICIES_OF_ONE = _policies(lambda column, name: column == bindparam(name))


async def policies(
    s: AsyncSession, agents: Iterable[str], people: Sequence[str]
) -> dict[str, AgentPolicy]:
    """The policies of `agents`, with the roles of `people` only: one statement
    (a row per agent and role of one of `people`; two joins, no union)."""
    names = sorted(set(agents))
    if not names:
        return {}
    who = list(people)
    if len(names) == 1 and len(who) == 1:
        one = {"names": names[0], "who": who[0], "who_t": who[0]}
        rows = await s.execute(_POLICIES_OF_ONE, one)
    else:
        rows = await s.execute(_POLICIES, {"names": names, "who": who, "who_t": who})
    found: dict[str, tuple[tuple[str, ...], Mode, Mode, dict[str, str]]] = {}
    for name, roots, max_owners, max_taskers, owner, tasker in rows:
        entry = found.setdefault(
            name,
            (
                tuple(r for r in roots or () if isinstance(r, str)),
                mode_for_deciding(max_owners),
                mode_for_deciding(max_taskers),
                {},
            ),
        )
        if tasker is not None:
            entry[3].setdefault(tasker, TASKER)
        if owner is not None:
            entry[3][owner] = OWNER  # an owner who is also listed as tasker stays an owner
    return {n: AgentPolicy(n, r, o, t, roles) for n, (r, o, t, roles) in found.items()}


def _own_terminal(session: SessionRow, agent: str) -> bool:
    """The agent's own interactive session (services/agents.interactive_session)."""
    return session.platform_id is not None and session.created_by == agent


MAX_ORIGIN_DEPTH = 8
"""How far back a session without owners is followed to the session it was started from."""


async def _owners(s: AsyncSession, session_id: str) -> list[str]:
    rows = await s.scalars(
        select(SessionDeciderRow.name).where(
            SessionDeciderRow.session_id == session_id, SessionDeciderRow.role == access.OWNER
        )
    )
    return list(rows.all())


async def _on_behalf_of(s: AsyncSession, session_id: str) -> list[str]:
    """The people a session's work is done for: the person who started it (not
    everyone on its first mail: being put on the To line is not asking for
    work); for the agent's own terminal session, its person (the owner); for a
    session an agent started, those of the session its first mail came from
    (`from_session_id`, checked when it was sent), and so on back."""
    seen: set[str] = set()
    current: str | None = session_id
    for _ in range(MAX_ORIGIN_DEPTH):
        if current is None or current in seen:
            return []
        seen.add(current)
        row = await s.get(SessionRow, current)
        if row is None:
            return []
        owners = await _owners(s, current)
        if row.created_by in owners:
            return [row.created_by]  # a person started it (owners are people)
        if row.platform_id is not None and owners:
            return owners  # an agent's terminal session: the person at it
        current = await s.scalar(
            select(MailRow.from_session_id)
            .where(MailRow.session_id == current)
            .order_by(MailRow.seq)
            .limit(1)
        )
    return []


async def check_send(
    s: AsyncSession,
    sender: Principal,
    deliveries: Sequence[Recipient],
    session: SessionRow,
    created: bool,
    permission_mode: str | None,
    from_session_id: str | None,
    type_: MailType = MailType.MESSAGE,
) -> None:
    """Refuse (Forbidden, nothing written by the caller yet is kept) a mail that
    sets an agent to work against its rules; set a new session's starting mode.

    `deliveries`: the mail's recipients. An
    agent that mails itself is judged like any other agent it mails. Mail of a
    type that never starts a turn (a failure notice, a receipt) sets nobody to
    work and is not judged."""
    if type_ in NO_TURN_TYPES:
        return
    agents = [(r.name, r.role) for r in deliveries if not r.is_human]
    if not agents:
        return
    by_agent: str | None = None
    origin_mode: Mode | None = None
    if sender.is_human:
        people = [sender.name]
    else:
        by_agent = sender.name
        origin = session if not created else None
        if origin is None and from_session_id is not None:
            origin = await s.get(SessionRow, from_session_id)
            if origin is not None and not await access.is_member(s, origin.id, sender.name):
                origin = None  # a session it is not in speaks for nobody
            if origin is not None:
                origin_mode = mode_for_deciding(origin.permission_mode)
        people = await _on_behalf_of(s, origin.id) if origin is not None else []
    found = await policies(s, [a for a, _ in agents], people)
    ceilings: list[Mode] = []
    for name, field in agents:
        policy = found[name]
        ceiling = tasking_ceiling(policy, people, by_agent=by_agent, field_=field)
        if isinstance(ceiling, Refusal):
            raise refuse(ceiling)
        if not await _terminal_of_its_person(s, session, name, sender):
            refusal = workspace_refusal(policy, session.workspace, field)
            if refusal is not None:
                raise refuse(refusal)
        # An agent new to a session would work in its mode: that is asking for
        # it (an agent already in it goes on as its deciders chose).
        if (
            not created
            and rank(session.permission_mode) > rank(ceiling)
            and not await access.is_member(s, session.id, name)
        ):
            raise refuse(mode_refusal(session.permission_mode, ceiling, [name]))
        ceilings.append(ceiling)
    if not created:
        return
    ceiling = lowest([*ceilings, *([origin_mode] if origin_mode else [])])
    if asks_too_much(permission_mode, ceiling):
        raise refuse(mode_refusal(str(permission_mode), ceiling, [a for a, _ in agents]))
    asked = mode_for_deciding(permission_mode) if permission_mode is not None else None
    mode = start_mode(asked, mode_for_deciding(session.permission_mode), ceiling)
    if mode != session.permission_mode:
        session.permission_mode = mode
        await s.flush()


async def _terminal_of_its_person(
    s: AsyncSession, session: SessionRow, agent: str, sender: Principal
) -> bool:
    """Is this the agent's own terminal session, mailed by the person at it?
    Only then do the roots not apply: that work already runs where its person
    started it. Anyone else mailing into it — or the agent itself — is judged
    by the roots like everywhere else."""
    if not (_own_terminal(session, agent) and sender.is_human):
        return False
    return sender.name in await _owners(s, session.id)


async def check_draft(
    s: AsyncSession,
    sender: Principal,
    to: Sequence[Address],
    cc: Sequence[Address],
    human: Mapping[str, bool],
    permission_mode: str | None,
    from_session_id: str | None,
) -> None:
    """The same rules for mail to be sent later (a calendar entry), so that its
    creator learns now, not at each delivery. The delivery checks again (the
    rules may change meanwhile). Judged as if the mail started a session in its
    first address's workspace; an agent's reply into an existing session is
    left to the delivery (its origin is that session, not known yet)."""
    if not to:
        return
    first = to[0]
    starts = first.session in (None, NEW_SESSION)
    if not sender.is_human and not starts:
        return
    draft = SessionRow(
        id="", workspace=first.path, permission_mode="workspace", created_by=sender.name
    )
    roles: tuple[tuple[Role, Sequence[Address]], ...] = (("to", to), ("cc", cc))
    deliveries = [Recipient(a.name, human[a.name], role) for role, addrs in roles for a in addrs]
    await check_send(s, sender, deliveries, draft, starts, permission_mode, from_session_id)


async def check_mode_change(
    s: AsyncSession, who: Principal, session: SessionRow, new_mode: str
) -> None:
    """A decider raises a session's mode only within their ceiling for each of its agents."""
    agents = [n for n, human in await access.participants(s, session.id) if not human]
    found = await policies(s, agents, [who.name])
    refusal = change_refusal(found.values(), who.name, session.permission_mode, new_mode)
    if refusal is not None:
        raise refuse(refusal)


async def check_interactive_owner(s: AsyncSession, agent: str, owner: str) -> None:
    """An agent's terminal session is decided by one of the agent's owners only
    (otherwise an agent could make any person its approver)."""
    found = await policies(s, [agent], [owner])
    if found[agent].role_of(owner) != OWNER:
        raise Forbidden(
            f"'{owner}' is not an owner of agent '{agent}': only its owners decide its "
            "terminal sessions (set AGENTMAIL_OWNER to one of them)",
            field="owner",
        )


# --- managing an agent's taskers, roots and ceilings -----------------------------


async def managed_agent(s: AsyncSession, who: Principal, name: str) -> AgentRow:
    """The agent, if `who` may manage it: its owners and admins. Other people
    and agents are refused (403); an unknown agent is 404."""
    row = await s.scalar(select(AgentRow).where(AgentRow.name == name))
    if row is None:
        raise not_found(f"agent '{name}'")
    if who.is_human and who.is_admin:
        return row
    if who.is_human:
        owner = await s.get(AgentOwnerRow, (row.id, who.name))
        if owner is not None:
            return row
    raise Forbidden(f"only the owners of agent '{name}' and admins may do this")


async def taskers(s: AsyncSession, agent: AgentRow) -> list[TaskerOut]:
    """The agent's owners (role owner) then its other taskers, each by when added."""
    owners = await s.execute(
        select(AgentOwnerRow.username, AgentOwnerRow.added_by, AgentOwnerRow.created_at)
        .where(AgentOwnerRow.agent_id == agent.id)
        .order_by(AgentOwnerRow.created_at, AgentOwnerRow.username)
    )
    others = await s.execute(
        select(AgentTaskerRow.username, AgentTaskerRow.added_by, AgentTaskerRow.created_at)
        .where(AgentTaskerRow.agent_id == agent.id)
        .order_by(AgentTaskerRow.created_at, AgentTaskerRow.username)
    )
    out = [TaskerOut(name=n, role=OWNER, added_by=b, created_at=at) for n, b, at in owners]
    seen = {t.name for t in out}
    out += [
        TaskerOut(name=n, role=TASKER, added_by=b, created_at=at)
        for n, b, at in others
        if n not in seen
    ]
    return out


async def add_tasker(s: AsyncSession, agent: AgentRow, username: str, by: str) -> None:
    """Idempotent; an owner is a tasker already."""
    if await s.scalar(select(UserRow.id).where(UserRow.username == username)) is None:
        raise invalid_value("name", f"no user is named '{username}' (taskers are people)")
    if await s.get(AgentOwnerRow, (agent.id, username)) is not None:
        return
    if await s.get(AgentTaskerRow, (agent.id, username)) is None:
        s.add(AgentTaskerRow(agent_id=agent.id, username=username, added_by=by))
        await s.flush()


async def remove_tasker(s: AsyncSession, agent: AgentRow, username: str) -> None:
    if await s.get(AgentOwnerRow, (agent.id, username)) is not None:
        raise Conflict(
            f"'{username}' owns agent '{agent.name}' and stays a tasker (an admin removes owners)",
            reason="owner",
        )
    row = await s.get(AgentTaskerRow, (agent.id, username))
    if row is None:
        raise not_found(f"tasker '{username}' of agent '{agent.name}'")
    await s.delete(row)
    await s.flush()


def roots_of(paths: list[str], field: str = "workspaces") -> list[str]:
    """Workspace roots as stored; Invalid naming `field[i]` (or `field` for their count)."""
    out: list[str] = []
    for i, p in enumerate(paths):
        try:
            out.append(normalise_root(p))
        except RootError as e:
            raise invalid_value(f"{field}[{i}]", f"workspace root {e}") from None
    try:
        return normalise_roots(out)  # duplicates dropped; the count is limited
    except RootError as e:
        raise invalid_value(field, str(e)) from None


def max_mode_out(agent: AgentRow) -> MaxModeOut:
    return MaxModeOut(
        owners=mode_for_deciding(agent.max_mode_owners),
        taskers=mode_for_deciding(agent.max_mode_taskers),
    )


def set_policy(
    agent: AgentRow,
    *,
    workspaces: list[str] | None,
    max_mode_owners: str | None,
    max_mode_taskers: str | None,
) -> None:
    """Change an agent's roots and ceilings (validated by the caller's schema)."""
    if workspaces is not None:
        agent.workspace_roots = roots_of(workspaces)
    for value, field in ((max_mode_owners, "owners"), (max_mode_taskers, "taskers")):
        if value is not None and value not in MODES:
            raise invalid_value(f"max_mode.{field}", f"a mode is one of {', '.join(MODES)}")
    if max_mode_owners is not None:
        agent.max_mode_owners = max_mode_owners
    if max_mode_taskers is not None:
        agent.max_mode_taskers = max_mode_taskers
