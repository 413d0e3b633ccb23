"""Who may read, who may decide, who may adopt: the one access rule (docs/access.md).

Membership is two subqueries, and everything else is built from them:
- `members_of(session)`: everyone in from/to/cc of the session's mails (participants);
- `sessions_of(name)`: the sessions a name takes part in or was made a decider of.

A `Reader` is built once per request from (principal, scope session). The read
rule is SQL only: `may_read` tests one row's session (`can_read` runs it on one
id; `may_read_sql` is it with bind parameters), `readable_ids` is the same rule
as a set, so a list, a search and a single read can never disagree about who
sees what (tests/services/test_access.py checks them against the rule written
apart).

Who decides in a session is one statement shape, `deciders_stmt` (its join form
`with_deciders`, its test `decides`), in one order, DECIDER_ORDER.

Power is not participation. A session's deciders (its owners, the humans on its
first mail, and the humans the owners named) alone decide requests, create
grants, change the mode, rename and archive. Being cc'd — by an agent above all —
or an admin posting a mail grants none of that: otherwise an agent could cc in a
more lenient human and pick its own approver.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    String,
    and_,
    bindparam,
    delete,
    false,
    literal,
    or_,
    select,
    true,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from mailui4agents.db.tables import (
    AgentOwnerRow,
    AgentRow,
    MailRow,
    RecipientRow,
    SessionDeciderRow,
    SessionRow,
)
from mailui4agents.domain.errors import Conflict, Forbidden, Missing, forbidden, not_found
from mailui4agents.services.principals import Principal

# The admin visibility policy, in one place: admins may read every session (mail,
# threads, search, session lists, grants), but gain no power by it — they decide
# only where they are deciders, and their contacts are their own.
ADMINS_READ_EVERY_SESSION = True

OWNER, DECIDER = "owner", "decider"


def sessions_of(name: str, session_id: str | None = None) -> Select[Any]:
    """The ids of the sessions `name` sent or received mail in, or decides in.
    With `session_id`, only that one (a cheap membership test)."""
    # Each part is read from an index alone (migration 0012): (from_name,
    # session_id) on mails, (name, session_id) on mail_recipients.
    sent = select(MailRow.session_id).where(MailRow.from_name == name)
    got = select(RecipientRow.session_id).where(RecipientRow.name == name)
    decides = select(SessionDeciderRow.session_id).where(SessionDeciderRow.name == name)
    if session_id is not None:
        sent = sent.where(MailRow.session_id == session_id)
        got = got.where(RecipientRow.session_id == session_id)
        decides = decides.where(SessionDeciderRow.session_id == session_id)
    return select(sent.union(got, decides).subquery().c.session_id)


# Aliases of the tables, never the outer query's own, made once: a new alias
# (ORM or Core) builds a proxy of every column with its foreign keys, and
# building the read rule over fresh ones on each request was a visible part of
# a request's cost (bench/server.py measures it).
_SENT = MailRow.__table__.alias()
_GOT = RecipientRow.__table__.alias()
_DECIDES = SessionDeciderRow.__table__.alias()
_SCOPED = SessionRow.__table__.alias()

Who = str | BindParameter[str]
"""A name or a workspace in the rule: a value, or a bind parameter of a
statement built once (services/reading.py: `may_read_sql`, `Reader.sql_params`)."""


def takes_part(
    name: Who, session_id: ColumnElement[str] | InstrumentedAttribute[str]
) -> ColumnElement[bool]:
    """`session_id IN sessions_of(name)` as three correlated EXISTS, each one
    seek of an index (migration 0012)."""
    sent, got, decides = _SENT, _GOT, _DECIDES
    return or_(
        select(sent.c.seq)
        .where(sent.c.from_name == name, sent.c.session_id == session_id)
        .exists(),
        select(got.c.id).where(got.c.name == name, got.c.session_id == session_id).exists(),
        select(decides.c.name)
        .where(decides.c.name == name, decides.c.session_id == session_id)
        .exists(),
    )


@dataclass(frozen=True)
class ReadShape:
    """What a reader's rule depends on besides its name and scope workspace:
    a statement built once per shape (with `may_read_sql`) serves every reader
    of that shape, their values passed as `Reader.sql_params()`."""

    unscoped_agent: bool
    sees_all: bool
    scoped: bool


READER_PARAM, WORKSPACE_PARAM = "access_reader", "access_workspace"


def _read_test(
    shape: ReadShape,
    name: Who,
    workspace: Who | None,
    session_id: ColumnElement[str] | InstrumentedAttribute[str],
) -> ColumnElement[bool]:
    if shape.unscoped_agent:
        return false()
    tests: list[ColumnElement[bool]] = []
    if not shape.sees_all:
        tests.append(takes_part(name, session_id))
    if shape.scoped:
        ses = _SCOPED
        scoped = select(ses.c.id).where(ses.c.id == session_id, ses.c.workspace == workspace)
        tests.append(scoped.exists())
    return and_(true(), *tests)


def _read_mail_test(
    shape: ReadShape,
    name: Who,
    workspace: Who | None,
    mail_seq: ColumnElement[int] | InstrumentedAttribute[int],
    session_id: ColumnElement[str] | InstrumentedAttribute[str],
) -> ColumnElement[bool]:
    if shape.unscoped_agent:
        got = _GOT
        return select(got.c.id).where(got.c.mail_seq == mail_seq, got.c.name == name).exists()
    return _read_test(shape, name, workspace, session_id)


def may_read_sql(
    shape: ReadShape, session_id: ColumnElement[str] | InstrumentedAttribute[str]
) -> ColumnElement[bool]:
    """`Reader.may_read` with the reader's name and workspace as bind parameters
    (`Reader.sql_params`): for a statement built once per shape."""
    name = bindparam(READER_PARAM, type_=String)
    return _read_test(shape, name, bindparam(WORKSPACE_PARAM, type_=String), session_id)


def may_read_mail_sql(
    shape: ReadShape,
    mail_seq: ColumnElement[int] | InstrumentedAttribute[int],
    session_id: ColumnElement[str] | InstrumentedAttribute[str],
) -> ColumnElement[bool]:
    """`Reader.may_read_mail` with bind parameters, as `may_read_sql`."""
    name = bindparam(READER_PARAM, type_=String)
    workspace = bindparam(WORKSPACE_PARAM, type_=String)
    return _read_mail_test(shape, name, workspace, mail_seq, session_id)


def members_of(session_id: str) -> Select[Any]:
    """(name, is_human) of everyone in from/to/cc of the session's mails."""
    senders = select(MailRow.from_name.label("name"), MailRow.from_human.label("human")).where(
        MailRow.session_id == session_id
    )
    recipients = (
        select(RecipientRow.name.label("name"), RecipientRow.is_human.label("human"))
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .where(MailRow.session_id == session_id)
    )
    both = senders.union(recipients).subquery()
    return select(both.c.name, both.c.human)


async def participants(s: AsyncSession, session_id: str) -> list[tuple[str, bool]]:
    """(name, is_human) of the session's participants, sorted by name."""
    seen: dict[str, bool] = {}
    for name, human in (await s.execute(members_of(session_id))).all():
        seen.setdefault(name, bool(human))
    return sorted(seen.items())


async def participants_of(
    s: AsyncSession, session_ids: Iterable[str]
) -> dict[str, list[tuple[str, bool]]]:
    """:func:`participants` of many sessions in one query (session lists)."""
    ids = sorted(set(session_ids))
    senders = select(
        MailRow.session_id.label("sid"),
        MailRow.from_name.label("name"),
        MailRow.from_human.label("human"),
    ).where(MailRow.session_id.in_(ids))
    recipients = (
        select(
            MailRow.session_id.label("sid"),
            RecipientRow.name.label("name"),
            RecipientRow.is_human.label("human"),
        )
        .join(MailRow, MailRow.seq == RecipientRow.mail_seq)
        .where(MailRow.session_id.in_(ids))
    )
    both = senders.union(recipients).subquery()
    seen: dict[str, dict[str, bool]] = {sid: {} for sid in ids}
    if ids:
        for sid, name, human in await s.execute(select(both.c.sid, both.c.name, both.c.human)):
            seen[sid].setdefault(name, bool(human))
    return {sid: sorted(people.items()) for sid, people in seen.items()}


async def is_member(s: AsyncSession, session_id: str, name: str) -> bool:
    """Does `name` take part in (or decide in) the session?"""
    return await s.scalar(sessions_of(name, session_id).limit(1)) is not None


# -- a session's deciders: one statement shape ----------------------------------------

DECIDER_ORDER = (SessionDeciderRow.role.desc(), SessionDeciderRow.created_at)
"""The order of a session's deciders everywhere: its owners, then the deciders
they named, in the order they were named."""

Sessions = str | Iterable[str] | ColumnElement[str] | InstrumentedAttribute[str]
"""Which sessions' deciders: one id, some ids, or a column (a bind parameter or
a column of an outer query)."""


def _of_sessions(sessions: Sessions) -> ColumnElement[bool]:
    col = SessionDeciderRow.session_id
    if isinstance(sessions, str):
        return col == sessions
    if isinstance(sessions, ColumnElement | InstrumentedAttribute):
        return col == sessions
    return col.in_(sorted(set(sessions)))


def deciders_stmt(sessions: Sessions, *columns: Any) -> Select[Any]:
    """THE statement of who decides in `sessions`: `columns` (default the names;
    add more with `.add_columns`, join what else a caller needs) of their
    SessionDeciderRow rows, by session, in DECIDER_ORDER."""
    cols = columns or (SessionDeciderRow.name,)
    return (
        select(*cols)
        .where(_of_sessions(sessions))
        .order_by(SessionDeciderRow.session_id, *DECIDER_ORDER)
    )


def with_deciders(stmt: Select[Any], session_id: InstrumentedAttribute[str]) -> Select[Any]:
    """`stmt` (one row of `session_id`'s session) with one row per decider of that
    session, in DECIDER_ORDER, the decider's columns NULL when there is none: the
    join form of `deciders_stmt`, for a query that reads the session anyway."""
    return stmt.outerjoin(SessionDeciderRow, SessionDeciderRow.session_id == session_id).order_by(
        *DECIDER_ORDER
    )


def decides(name: Who, session_id: ColumnElement[str] | InstrumentedAttribute[str]) -> Any:
    """A test: `name` is a decider of the session `session_id` (an EXISTS)."""
    return deciders_stmt(session_id).where(SessionDeciderRow.name == name).order_by(None).exists()


async def deciders(s: AsyncSession, session_id: str) -> list[str]:
    """The humans who decide in the session, in DECIDER_ORDER."""
    return list((await s.scalars(deciders_stmt(session_id))).all())


async def deciders_of(s: AsyncSession, session_ids: Iterable[str]) -> dict[str, list[str]]:
    """:func:`deciders` of many sessions in one query (session lists)."""
    ids = sorted(set(session_ids))
    out: dict[str, list[str]] = {sid: [] for sid in ids}
    if ids:
        stmt = deciders_stmt(ids, SessionDeciderRow.session_id, SessionDeciderRow.name)
        for sid, name in await s.execute(stmt):
            out[sid].append(name)
    return out


async def add_owners(s: AsyncSession, session_id: str, names: Iterable[str], by: str) -> None:
    """Make `names` (humans on the session's first mail) its owners."""
    for name in dict.fromkeys(names):
        s.add(SessionDeciderRow(session_id=session_id, name=name, role=OWNER, added_by=by))
    await s.flush()


async def decider_rows(s: AsyncSession, session_id: str) -> list[SessionDeciderRow]:
    return list((await s.scalars(deciders_stmt(session_id, SessionDeciderRow))).all())


async def add_decider(s: AsyncSession, session: SessionRow, name: str, by: Principal) -> None:
    """An owner names another human who may decide (idempotent)."""
    row = await s.get(SessionDeciderRow, (session.id, name))
    if row is None:
        s.add(SessionDeciderRow(session_id=session.id, name=name, role=DECIDER, added_by=by.name))
        await s.flush()


async def remove_decider(s: AsyncSession, session: SessionRow, name: str) -> None:
    """An owner takes a decider's power away; owners cannot be removed."""
    row = await s.get(SessionDeciderRow, (session.id, name))
    if row is None:
        raise not_found(f"decider '{name}' of session '{session.id}'")
    if row.role == OWNER:
        raise Conflict(f"'{name}' owns this session and stays a decider", reason="owner")
    await s.execute(
        delete(SessionDeciderRow).where(
            SessionDeciderRow.session_id == session.id, SessionDeciderRow.name == name
        )
    )


@dataclass(frozen=True)
class Reader:
    """What one caller may see and do, for one request.

    `scope` is the session an agent is working in (humans have none). An agent's
    reads are bound to its scope's workspace; without a scope it sees only mail
    addressed to it (its inbox, those mails, their attachments) — the boundary is
    never opt-in."""

    principal: Principal
    scope: SessionRow | None = None

    @property
    def name(self) -> str:
        return self.principal.name

    @property
    def scope_id(self) -> str | None:
        return self.scope.id if self.scope is not None else None

    @property
    def unscoped_agent(self) -> bool:
        return self.principal.kind == "agent" and self.scope is None

    @property
    def sees_all(self) -> bool:
        return self.principal.is_human and self.principal.is_admin and ADMINS_READ_EVERY_SESSION

    def readable_ids(self) -> Select[Any]:
        """The ids of the sessions this reader may read: `may_read` as a set."""
        stmt = select(SessionRow.id)
        if self.unscoped_agent:
            return stmt.where(false())
        if not self.sees_all:
            stmt = stmt.where(SessionRow.id.in_(sessions_of(self.name)))
        if self.scope is not None:
            stmt = stmt.where(SessionRow.workspace == self.scope.workspace)
        return stmt

    @property
    def shape(self) -> ReadShape:
        return ReadShape(self.unscoped_agent, self.sees_all, self.scope is not None)

    def sql_params(self) -> dict[str, str]:
        """The values of `may_read_sql` / `may_read_mail_sql` for this reader."""
        params = {READER_PARAM: self.name}
        if self.scope is not None:
            params[WORKSPACE_PARAM] = self.scope.workspace
        return params

    def may_read(
        self, session_id: ColumnElement[str] | InstrumentedAttribute[str]
    ) -> ColumnElement[bool]:
        """`readable_ids`' rule as a test of one row's session (correlated EXISTS,
        one index seek each): for a query that visits few rows, such as a search
        newest first that stops at its limit. The set of a busy user's sessions
        costs a scan of all their mail, which grows with it (bench/scale.py)."""
        workspace = self.scope.workspace if self.scope is not None else None
        return _read_test(self.shape, self.name, workspace, session_id)

    def may_read_mail(
        self,
        mail_seq: ColumnElement[int] | InstrumentedAttribute[int],
        session_id: ColumnElement[str] | InstrumentedAttribute[str],
    ) -> ColumnElement[bool]:
        """`can_read_mail` as a test of one mail row: an unscoped agent reads the
        mails addressed to it (one index seek), everyone else `may_read`."""
        workspace = self.scope.workspace if self.scope is not None else None
        return _read_mail_test(self.shape, self.name, workspace, mail_seq, session_id)

    def own_ids(self) -> Select[Any]:
        """Sessions the reader itself takes part in, within its scope (never all,
        not even for admins): whom *I* exchanged mail with."""
        stmt = select(SessionRow.id).where(SessionRow.id.in_(sessions_of(self.name)))
        if self.unscoped_agent:
            return stmt.where(false())
        if self.scope is not None:
            stmt = stmt.where(SessionRow.workspace == self.scope.workspace)
        return stmt

    async def can_read(self, s: AsyncSession, session: SessionRow) -> bool:
        """`may_read`, the rule as SQL, applied to this one session: the check
        and the lists can never disagree (tests/services/test_access.py)."""
        one = select(literal(1)).where(self.may_read(literal(session.id, String)))
        return await s.scalar(one) is not None

    async def ensure_read(self, s: AsyncSession, session: SessionRow, what: str) -> None:
        """NotFound — the same as "does not exist" — unless this reader may read it."""
        if not await self.can_read(s, session):
            raise not_found(what)

    async def may_post(self, s: AsyncSession, session: SessionRow) -> bool:
        """Members post into a session, and admins (who may read every session);
        posting grants no power."""
        return self.sees_all or await is_member(s, session.id, self.name)

    def may_post_known(self, member: bool) -> bool:
        """may_post, with `member` (is_member's answer) looked up by the caller."""
        return self.sees_all or member

    async def can_read_mail(
        self, s: AsyncSession, session: SessionRow, recipients: Iterable[str]
    ) -> bool:
        """A mail is readable in a readable session; an unscoped agent reads the
        mails addressed to it and nothing else."""
        if self.unscoped_agent:
            return self.name in recipients
        return await self.can_read(s, session)

    async def can_decide(self, s: AsyncSession, session: SessionRow) -> bool:
        """Owners and named deciders — humans — only. Admins too only if named."""
        if not self.principal.is_human:
            return False
        return bool(await s.scalar(select(decides(self.name, literal(session.id, String)))))

    async def ensure_decide(self, s: AsyncSession, session: SessionRow, what: str) -> None:
        """NotFound for who cannot even read it; Forbidden for a reader without the power."""
        if not await self.can_read(s, session):
            raise not_found(what)
        if not await self.can_decide(s, session):
            raise _no_power()

    def ensure_decide_known(self, readable: bool, deciders: Sequence[str], what: str) -> None:
        """ensure_decide, with `readable` (`may_read_sql`'s answer for this reader)
        and the session's `deciders` (deciders_stmt's) looked up by the caller."""
        if not readable:
            raise not_found(what)
        if not (self.principal.is_human and self.name in deciders):
            raise _no_power()

    async def is_owner(self, s: AsyncSession, session: SessionRow) -> bool:
        row = await s.get(SessionDeciderRow, (session.id, self.name))
        return self.principal.is_human and row is not None and row.role == OWNER

    async def ensure_owner(self, s: AsyncSession, session: SessionRow, what: str) -> None:
        """What only a session's owners and admins may do to its worktree (merge,
        discard, keep; docs/review.md): NotFound for who cannot read the session,
        Forbidden for every other reader — the deciders an owner named too, and
        agents: that power changes the person's repository, not a request."""
        if not await self.can_read(s, session):
            raise not_found(what)
        if self.principal.is_human and self.principal.is_admin:
            return
        if not await self.is_owner(s, session):
            raise forbidden(
                "only the session's owners (and admins) may merge, discard or keep its worktree"
            )

    async def can_see_platform_sessions_of(self, s: AsyncSession, agent_name: str) -> bool:
        """An agent's platform sessions (titles included) are for the agent itself
        and its owners; other agents and humans never see them."""
        if self.principal.kind == "agent":
            return self.name == agent_name
        found = await s.scalar(
            select(literal(1)).where(
                AgentOwnerRow.username == self.name,
                AgentOwnerRow.agent_id.in_(select(AgentRow.id).where(AgentRow.name == agent_name)),
            )
        )
        return found is not None

    async def can_adopt(self, s: AsyncSession, agent_name: str) -> bool:
        """Only an agent's owners adopt its platform sessions (a stranger who got
        there first would take over the owner's conversation)."""
        return self.principal.is_human and await self.can_see_platform_sessions_of(s, agent_name)


def _no_power() -> Forbidden:
    return forbidden(
        "only the session's owners and the deciders they named may do this "
        "(being cc'd or posting into a session grants no power)"
    )


async def reader(s: AsyncSession, principal: Principal, scope_session_id: str | None) -> Reader:
    """The Reader for a request. An agent's scope must be a session it takes part
    in (naming another would widen what it may read): NotFound otherwise. Humans are
    not workspace-bound; a scope they pass is ignored."""
    if principal.kind != "agent" or scope_session_id is None:
        return Reader(principal)
    params = {"scope_id": scope_session_id, READER_PARAM: principal.name}
    scope = await s.scalar(_scope_stmt(), params)  # the session and the membership at once
    if scope is None:
        raise not_found(f"session '{scope_session_id}'")
    return Reader(principal, scope)


@cache
def _scope_stmt() -> Select[SessionRow]:
    """A session, if the agent named by READER_PARAM takes part in it."""
    return select(SessionRow).where(
        SessionRow.id == bindparam("scope_id"),
        takes_part(bindparam(READER_PARAM, type_=String), SessionRow.id),
    )


def require_scope(r: Reader, what: str) -> None:
    """Reads beyond one's own mail need the session one works in."""
    if r.unscoped_agent:
        raise Missing(
            "session_id",
            f"{what} needs session_id: the session you are working in (without it an agent "
            "sees only mail addressed to it)",
        )


# --- calendar entries (docs/access.md, "Calendar") -----------------------------------
#
# An entry is mail its creator will send: only the creator sees and edits it.
# Admins see every entry and may cancel one (cancelling only takes power away),
# but never edit one: that would send mail in someone else's name.


def can_see_entry(who: Principal, created_by: str) -> bool:
    return who.name == created_by or (who.is_human and who.is_admin)


def can_edit_entry(who: Principal, created_by: str) -> bool:
    return who.name == created_by


def can_cancel_entry(who: Principal, created_by: str) -> bool:
    return can_see_entry(who, created_by)
